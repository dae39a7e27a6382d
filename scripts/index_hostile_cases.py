"""Each hostile results index or bundle the kit refuses, with what each command does with it.

    python scripts/index_hostile_cases.py [--markdown]

Builds every case in a temporary folder from SYNTHETIC bundles (scripts/bench_index.py's small shape:
invented numbers, host names ``synthetic-nodeNNN``), runs each command on it in a process of its own
and prints, per command: its exit code, its wall time and peak RSS (``os.wait4``), the first line it
printed on stderr (without ``--markdown``), and whether the folder's files are byte for byte as they
were: after a read, always; after `kit index add`, unless it succeeded (a refusal writes nothing). tests/test_index_untrusted.py checks the same cases; this prints the figures
docs/results-index.md ("What the index refuses") quotes.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tarfile
import tempfile
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]

from bench_index import WRAP, make_bundles  # noqa: E402


def run(args: list, tmp: Path) -> dict:
    """One kit command in a process of its own, started by a small wrapper (bench_index.WRAP), so that
    its peak RSS is its own and not this script's (Linux keeps a process's peak across fork and
    exec): exit code, seconds, peak MB, and its first line that says what happened."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200")
    report = tmp / "rusage.json"
    t0 = time.perf_counter()
    got = subprocess.run([sys.executable, "-c", WRAP, str(report), sys.executable, "-m", "kit", *map(str, args)],
                         env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - t0
    usage = json.loads(report.read_text())
    lines = [ln.strip() for ln in got.stderr.splitlines()]
    said = [ln for ln in lines if ln.startswith(("error:", "refused", "rolled back", "updated"))] or [
        ln for ln in lines if " rolled back " in ln] or lines[-1:]
    return {"rc": usage["rc"], "s": seconds, "mb": usage["maxrss_kib"] / 1024,
            "line": said[0].replace(str(tmp), "…") if said else ""}


def files(folder: Path) -> dict:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def rebundle(src: Path, dst: Path, edit) -> Path:
    """``src`` with ``edit(files)`` applied to its members, the manifest's hashes made true again."""
    with tarfile.open(src, "r:gz") as tf:
        members = {m.name.split("/", 1)[1]: tf.extractfile(m).read() for m in tf if m.isfile()}
    edit(members)
    manifest = json.loads(members["manifest.json"])
    for name, data in members.items():
        if name != "manifest.json":
            manifest["files"][name] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    members["manifest.json"] = json.dumps(manifest).encode()
    with tarfile.open(dst, "w:gz") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(f"b/{name}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return dst


def throughput(value):
    def edit(members):
        r = json.loads(members["results.json"])
        r["cells"][0]["repeats"][0]["throughput_items_per_s"] = value
        members["results.json"] = json.dumps(r).encode()
    return edit


def figures(clean: Path, value: float):
    """Build: the clean index with the second run's stored throughputs all ``value``."""
    import dataclasses

    from kit.index.figures_codec import decode, encode

    def build(index: Path) -> None:
        shutil.copyfile(clean, index)
        con = sqlite3.connect(index)
        fig = decode(con.execute("SELECT figures_z FROM bundles WHERE id = 2").fetchone()[0])
        for cell in fig.cells:
            cell.throughput_values = [value for _ in cell.throughput_values]
            if cell.throughput is not None:
                cell.throughput = dataclasses.replace(cell.throughput, mean=value, median=value, min=value, max=value,
                                                      sd=0.0)
            cell.throughput_median = value
        con.execute("UPDATE bundles SET figures_z = ? WHERE id = 2", (encode(fig),))
        con.commit()
        con.close()
    return build


def _killed_writer(db: Path, code: str) -> None:
    """Run ``code`` on ``db`` in a process that ends with os._exit: a writer cut short."""
    subprocess.run([sys.executable, "-c", f"import os, sqlite3; c = sqlite3.connect({str(db)!r}, isolation_level=None); "
                    + code + "; os._exit(0)"], check=True)


def journal(clean: Path, host: str, *hostile: str):
    """Build: the clean index with a hot journal beside it that, rolled back, applies ``hostile``
    (a writer's journal holds the pages as they were: made by undoing ``hostile`` on a copy)."""
    def build(index: Path) -> None:
        src = index.parent / "src"
        src.mkdir()
        shutil.copyfile(clean, src / "i.sqlite")
        con = sqlite3.connect(src / "i.sqlite")
        for s in hostile:
            con.execute(s)
        con.commit()
        con.close()
        undo = "c.execute('DROP TRIGGER wipe'); " if len(hostile) > 1 else ""
        _killed_writer(src / "i.sqlite", "c.execute('PRAGMA cache_size = 1'); c.execute('BEGIN IMMEDIATE'); " + undo
                       + f"c.execute(\"UPDATE bundles SET host = {host!r}\"); "
                       "[c.execute('INSERT INTO meta VALUES (?, randomblob(4000))', (f'k{i}',)) for i in range(300)]")
        shutil.copyfile(clean, index)
        shutil.copyfile(src / "i.sqlite-journal", f"{index}-journal")
        shutil.rmtree(src)
    return build


def wal(clean: Path):
    """Build: the clean index with a WAL file beside it that changes its host names."""
    def build(index: Path) -> None:
        src = index.parent / "src"
        src.mkdir()
        shutil.copyfile(clean, src / "i.sqlite")
        _killed_writer(src / "i.sqlite", "c.execute('PRAGMA journal_mode = WAL'); c.execute('PRAGMA wal_autocheckpoint = 0'); "
                                         "c.execute(\"UPDATE bundles SET host = 'PLANTED'\")")
        shutil.copyfile(clean, index)
        shutil.copyfile(src / "i.sqlite-wal", f"{index}-wal")
        shutil.rmtree(src)
    return build


def cases(tmp: Path, clean: Path, a: Path, b: Path, bad: Path, host: str) -> list:
    """(case, commands, build or None, SQL statements, their parameters) for each hostile case."""
    reads = [["compare", "--index", "INDEX"], ["index", "list", "--index", "INDEX"]]
    cols = [r[1] for r in sqlite3.connect(clean).execute("PRAGMA table_info(bundles)") if r[1] != "id"]
    picks = ", ".join("n" if col == "sha256" else "x''" if col.endswith("_z") else "0" if col in (
        "size_bytes", "interrupted", "n_cells") else "''" for col in cols)
    nothing = lambda index: None  # noqa: E731  (no index: the command makes or reads none)
    trigger = "CREATE TRIGGER wipe AFTER INSERT ON bundles BEGIN DELETE FROM cells; END"
    history = ["index", "history", "--index", "INDEX", "--host", host]
    out = [
        ("a bundle whose throughput is 1e300", [["bundle", "verify", bad], ["index", "add", "--index", "INDEX", bad, a, b],
                                                ["compare", bad, a], ["compare", a, bad, b]], nothing),
        ("figures 1e300 planted in an index", [reads[0], reads[0] + ["--group-by", "gpu"]], figures(clean, 1e300)),
        ("figures 1e-300 planted in an index", [reads[0], reads[0] + ["--group-by", "gpu"]], figures(clean, 1e-300)),
        ("a hot journal that plants a trigger", reads + [["index", "add", "--index", "INDEX"]],
         journal(clean, host, "UPDATE bundles SET host = 'PLANTED'", trigger)),
        ("a hot journal that changes host names", reads + [["index", "add", "--index", "INDEX"]],
         journal(clean, host, "UPDATE bundles SET host = 'PLANTED'")),
        ("a WAL file planted beside the index", reads, wal(clean)),
        *((f"PRAGMA user_version lying ({v})", [reads[0]], None, (f"PRAGMA user_version = {v}",)) for v in (3, 6)),
        ("2 million rows in bundles", reads, None, (
            f"INSERT INTO bundles ({', '.join(cols)}) WITH RECURSIVE k(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM k "
            f"WHERE n < 2000000) SELECT {picks} FROM k",)),
        ("a raw 300 MiB blob in a compressed column", reads, None,
         ("UPDATE bundles SET figures_z = zeroblob(300 * 1024 * 1024) WHERE id = 1",)),
        ("a JSON nesting bomb in a compressed column", [reads[0]], None, ("UPDATE bundles SET env_z = ? WHERE id = 1",),
         (zlib.compress(b"[" * 100_000 + b"]" * 100_000),)),
        ("a BLOB in a TEXT column", reads + [history], None, ("UPDATE bundles SET host = x'41' WHERE id = 1",)),
        ("a 10,000-character host name with escape sequences", [reads[1]], None,
         ("UPDATE bundles SET host = ? WHERE id = 1",), ("\x1b[31mX" * 2000,)),
        ("an index add whose every bundle is refused", [["index", "add", "--index", "INDEX", bad]], nothing),
        ("a zero-byte file", [reads[0], ["index", "add", "--index", "INDEX", a]], lambda i: i.write_bytes(b"")),
        ("a FIFO", reads + [["index", "add", "--index", "INDEX", a]], lambda i: os.mkfifo(i)),
        ("a device file", [["index", "list", "--index", "/dev/null"]], nothing),
    ]
    for what, sql in (("negative size_bytes", "UPDATE bundles SET size_bytes = -1 WHERE id = 1"),
                      ("text in n_cells", "UPDATE bundles SET n_cells = 'many' WHERE id = 1"),
                      ("negative throughput_median", "UPDATE cells SET throughput_median = -5 WHERE bundle_id = 1"),
                      ("NaN in throughput_json", "UPDATE cells SET throughput_json = '[NaN, 1]' WHERE bundle_id = 1")):
        out.append((f"tampered: {what}", [history] + (reads if "cells" not in sql else []), None, (sql,)))
    # each as (case, commands, build, statements, parameters): the missing ones empty
    return [c + ((), ())[len(c) - 3:] if len(c) < 5 else c for c in out]


def run_case(tmp: Path, n: int, clean: Path, name: str, commands: list, build, sql: tuple, params: tuple) -> list:
    """Build case ``n`` in a folder of its own and run each command on it; a row per command."""
    folder = tmp / f"case{n}"
    folder.mkdir()
    index = folder / "index.sqlite"
    if build is None:
        shutil.copyfile(clean, index)
        con = sqlite3.connect(index)
        for s in sql:
            con.execute(s, params)
        con.commit()
        con.close()
    else:
        build(index)
    rows = []
    for cmd in commands:
        before = files(folder)
        got = run([str(index) if x == "INDEX" else x for x in cmd], tmp)
        same = files(folder) == before
        writes = cmd[:2] == ["index", "add"] and not same  # the one command that writes: its additions
        shown = (str(x) if x == "INDEX" or str(x).startswith("/dev/") or "/" not in str(x) else Path(str(x)).name
                 for x in cmd)
        got.update(case=name, cmd=" ".join(shown),
                   unchanged=None if writes else same)
        rows.append(got)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="index-hostile-") as tmp:
        tmp = Path(tmp)
        make_bundles("small", 3, 3, tmp / "bundles")
        a, b, c = sorted((tmp / "bundles").glob("*.tar.gz"))
        clean = tmp / "clean.sqlite"
        assert run(["index", "add", "--index", clean, a, b], tmp)["rc"] == 0
        host = sqlite3.connect(clean).execute("SELECT host FROM bundles ORDER BY id").fetchone()[0]
        bad = rebundle(c, tmp / "bad.tar.gz", throughput(1e300))
        for n, case in enumerate(cases(tmp, clean, a, b, bad, host), 1):
            rows.extend(run_case(tmp, n, clean, *case))
    say(rows, args.markdown)


def say(rows: list, markdown: bool) -> None:
    """The rows as text (with each command's first line), or as a Markdown table without it."""
    if markdown:
        print("| case | command | exit | peak MB | s | files unchanged |\n| --- | --- | --- | --- | --- | --- |")
    last = None
    for r in rows:
        case = r["case"] if r["case"] != last else ""
        last = r["case"]
        same = {True: "yes", False: "NO", None: "written (it adds)"}[r["unchanged"]]
        if markdown:
            print(f"| {case} | `kit {r['cmd']}` | {r['rc']} | {r['mb']:.0f} | {r['s']:.1f} | {same} |")
        else:
            print(f"{case}\n  kit {r['cmd']}\n    exit {r['rc']}, {r['mb']:.0f} MB, {r['s']:.1f} s, files unchanged: "
                  f"{same}\n    {r['line']}")


if __name__ == "__main__":
    main()
