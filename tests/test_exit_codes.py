"""The one exit-code table (docs/troubleshooting.md "Exit codes", kit.errors.EXIT_CODES), enforced.

Each case runs ``python -m kit ...`` in a subprocess from an empty temporary
folder (so nothing depends on the repository root) and checks the exit code,
that stderr carries an ``error:`` line, and that no traceback is printed.
Run-related cases (``kit run``, ``--resume``, signals) are in
tests/test_exit_codes_run.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures.results.factory import (
    bundle_members as _members,
    write_bundle as _write,
    make_cell,
    make_env,
    make_results,
    make_run_dir,
    standard_cells,
)
from kit.report.export import export_run
from kit.errors import EXIT_CODES

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    """Every file a case names, made once."""
    root = tmp_path_factory.mktemp("inputs")
    good_run = make_run_dir(root / "runs", make_results(standard_cells(), make_env()))
    good = export_run(good_run, root / "bundles")
    slow = export_run(make_run_dir(root / "slow", make_results(standard_cells(speed=0.5), make_env(), run_id="FIXTURE-slow")),
                      root / "bundles")
    other_env = make_env(host="fixture-host-b")
    other_env["host"] = {"host_id": "another-host"}
    other = export_run(make_run_dir(root / "other", make_results([make_cell(precision="tf32")], other_env, run_id="FIXTURE-o")),
                       root / "bundles")
    files = _members(good)
    p: dict[str, Path] = {"good": good, "slow": slow, "other": other, "good_run": good_run}

    tampered = dict(files)
    tampered["env.json"] = tampered["env.json"].replace(b"fixture-host-a", b"fixture-host-z")
    p["tampered"] = _write(root / "tampered.tar.gz", tampered, rehash=False)
    p["active"] = _write(root / "active.tar.gz", dict(files, **{
        "report.html": files["report.html"].replace(b"</main>", b"<script>alert(1)</script></main>", 1)}))
    p["bad_json"] = _write(root / "bad-json.tar.gz", dict(files, **{"results.json": b'{"schema_version": 1, "cells": [}'}))
    res = json.loads(files["results.json"])
    p["cells_oops"] = _write(root / "oops.tar.gz", dict(files, **{"results.json": json.dumps(dict(res, cells="oops")).encode()}))
    p["v99"] = _write(root / "v99.tar.gz", dict(files, **{"results.json": json.dumps(dict(res, schema_version=99)).encode()}))
    p["not_gzip"] = root / "plain.tar.gz"
    p["not_gzip"].write_text("not a bundle")
    p["empty_dir"] = root / "empty"
    p["empty_dir"].mkdir()
    bad_run = root / "bad-run" / "R"
    bad_run.mkdir(parents=True)
    (bad_run / "results.json").write_text("{nope")
    p["bad_run"] = bad_run
    p["results_a"] = root / "a.results.json"
    p["results_a"].write_text(files["results.json"].decode())
    p["results_oops"] = root / "oops.results.json"
    p["results_oops"].write_text(json.dumps(dict(res, cells="oops")))
    p["fifo"] = root / "pipe.tar.gz"
    os.mkfifo(p["fifo"])  # opening it would block forever
    p["a_file"] = root / "a-file"
    p["a_file"].write_text("x")
    return p


# (id, arguments with {name} for an input, expected exit code)
CASES = [
    ("version", ["--version"], 0),
    ("verify-good", ["bundle", "verify", "{good}"], 0),
    ("show-good", ["bundle", "show", "{good}"], 0),
    ("unknown-command", ["no-such-command"], 2),
    ("unknown-option", ["bundle", "verify", "--no-such-option", "{good}"], 2),
    ("verify-nonexistent", ["bundle", "verify", "/nonexistent/b.tar.gz"], 2),
    ("verify-a-folder", ["bundle", "verify", "{empty_dir}"], 2),
    ("verify-a-fifo", ["bundle", "verify", "{fifo}"], 2),
    ("show-nonexistent", ["bundle", "show", "/nonexistent/b.tar.gz"], 2),
    ("export-empty-dir", ["bundle", "export", "{empty_dir}"], 2),
    ("export-nonexistent", ["bundle", "export", "/nonexistent/run"], 2),
    ("export-out-is-a-file", ["bundle", "export", "{good_run}", "--out", "{a_file}"], 2),
    ("merge-one-bundle", ["bundle", "merge", "{good}"], 2),
    ("merge-a-bundle-with-itself", ["bundle", "merge", "{good}", "{good}", "--out", "merged"], 2),
    ("merge-two-machines", ["bundle", "merge", "{good}", "{other}", "--out", "merged"], 2),
    ("merge-out-is-a-file", ["bundle", "merge", "{good}", "{slow}", "--out", "{a_file}"], 2),
    ("merge-nonexistent", ["bundle", "merge", "{good}", "/nonexistent/b.tar.gz"], 2),
    ("compare-baseline-nonexistent", ["compare", "{good}", "{slow}", "--baseline", "/nonexistent/x.tar.gz"], 2),
    ("compare-unknown-reference", ["compare", "{good}", "--against", "no-such-reference"], 2),
    ("compare-one-input", ["compare", "{good}"], 2),
    ("results-json-invalid-json-in-run-folder", ["bundle", "export", "{bad_run}"], 4),
    ("bundle-results-invalid-json", ["bundle", "verify", "{bad_json}"], 4),
    ("bundle-cells-oops-verify", ["bundle", "verify", "{cells_oops}"], 4),
    ("bundle-cells-oops-show", ["bundle", "show", "{cells_oops}"], 4),
    ("bundle-cells-oops-compare", ["compare", "{good}", "{cells_oops}"], 4),
    ("results-file-cells-oops-compare", ["compare", "{results_a}", "{results_oops}"], 4),
    ("bundle-schema-v99", ["bundle", "verify", "{v99}"], 4),
    ("verify-tampered", ["bundle", "verify", "{tampered}"], 5),
    ("verify-active-content", ["bundle", "verify", "{active}"], 5),
    ("show-active-content", ["bundle", "show", "{active}"], 5),
    ("verify-not-gzip", ["bundle", "verify", "{not_gzip}"], 5),
    ("merge-tampered", ["bundle", "merge", "{good}", "{tampered}", "--out", "merged"], 5),
    ("compare-fail-if-slower", ["compare", "{good}", "{slow}", "--fail-if-slower", "5", "--markdown", "-"], 9),
]


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")  # this checkout's kit, from any folder
    env["COLUMNS"] = "200"
    return env


@pytest.mark.parametrize("args, expected", [(a, e) for _, a, e in CASES], ids=[c[0] for c in CASES])
def test_exit_code(args, expected, inputs, tmp_path):
    argv = [a.format(**{k: str(v) for k, v in inputs.items()}) for a in args]
    r = subprocess.run([sys.executable, "-m", "kit", *argv], cwd=tmp_path, capture_output=True, text=True,
                       env=_env(), timeout=120)
    assert r.returncode == expected, f"kit {' '.join(args)}: exit {r.returncode}, expected {expected}\n{r.stderr}"
    assert "Traceback" not in r.stderr, r.stderr
    if expected not in (0, 9):
        lines = [ln for ln in r.stderr.splitlines() if re.match(r"\s*error:", ln, re.IGNORECASE)
                 or re.match(r"\s*Error: ", ln)]
        assert len(lines) >= 1 and lines[0].strip() != "error:", r.stderr
    if expected == 9:
        assert "slower" in (r.stdout + r.stderr).lower()


def _readme_codes() -> dict[int, str]:
    text = (REPO / "docs" / "troubleshooting.md").read_text(encoding="utf-8")
    section = text.split("\n## Exit codes", 1)[1].split("\n## ", 1)[0]
    return {int(m.group(1)): m.group(2).strip() for m in re.finditer(r"^\|\s*(\d+)\s*\|\s*(.+?)\s*\|\s*$", section, re.M)}


def test_every_exit_code_is_in_the_readme_table_and_every_row_is_a_code():
    readme = _readme_codes()
    assert readme, "docs/troubleshooting.md has no Exit codes table"
    assert set(readme) == set(EXIT_CODES), (sorted(set(readme) ^ set(EXIT_CODES)))


def test_every_kit_error_class_has_a_documented_code():
    import kit.errors as errors

    classes = [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, errors.KitError)]
    assert {c.exit_code for c in classes} <= set(EXIT_CODES)


def test_the_cases_cover_every_bundle_related_code():
    assert {e for _, _, e in CASES} >= {0, 2, 4, 5, 9}
