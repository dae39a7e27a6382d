"""`kit data fetch | verify | info` from the command line: exit codes, messages, no tracebacks."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import kit
from kit.cli.main import app, main
from kit.data import registry
from kit.facts.datasets import CIFAR100, WIKITEXT2
from test_data_support import cifar_fixture, make_cifar_tarball, wikitext_fixture

REPO = Path(kit.__file__).resolve().parent.parent


def _closed_port_mirror() -> str:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there: connections are refused at once, no network involved
    return f"http://127.0.0.1:{port}/"


def _run(argv: list[str], capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
        raise SystemExit(0)
    out = capsys.readouterr()
    return exit_info.value.code or 0, out.out, out.err


@pytest.mark.parametrize("command", ["fetch", "verify", "info"])
def test_every_data_command_has_help(command):
    result = CliRunner().invoke(app, ["data", command, "--help"])
    assert result.exit_code == 0
    assert "--data-dir" in result.output and len(result.output) > 200


def test_fetch_offline_exits_3_with_file_checksum_folder_and_synthetic(workdir, monkeypatch, capsys):
    monkeypatch.setenv("KIT_DATA_MIRRORS", _closed_port_mirror())
    code, _out, err = _run(["data", "fetch", "cifar100", "--quiet"], capsys)
    assert code == 3
    assert "cifar-100-python.tar.gz" in err and CIFAR100.md5 in err
    assert str(workdir / "data") in err and "--data synthetic" in err
    assert "Traceback" not in err


def test_fetch_offline_as_a_real_process_prints_no_traceback(tmp_path):
    env = dict(os.environ, KIT_DATA_MIRRORS=_closed_port_mirror(), KIT_DATA_DIR=str(tmp_path / "d"), PYTHONPATH=str(REPO), COLUMNS="200")
    proc = subprocess.run([sys.executable, "-m", "kit", "data", "fetch", "wikitext2", "-q"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert proc.returncode == 3
    assert "wikitext-2-v1.zip" in proc.stderr and WIKITEXT2.md5 in proc.stderr and "--data synthetic" in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout


def _use_facts(monkeypatch, facts) -> None:
    """The data set of ``facts``' name described with these facts (a fixture's checksum and sizes)."""
    found = [d._replace(facts=facts) if d.facts.name == facts.name else d for d in registry.all_datasets()]
    monkeypatch.setattr(registry, "_FOUND", found)


def test_fetch_from_a_local_url_then_verify_and_info(workdir, monkeypatch, capsys):
    src = workdir / "usb"
    facts = cifar_fixture(src)
    _use_facts(monkeypatch, facts)  # the CLI sees the fixture's checksum and sizes
    url = (src / facts.filename).as_uri()

    code, out, _err = _run(["data", "fetch", "cifar100", "--url", url, "-q"], capsys)
    assert code == 0 and "downloaded from file://" in out
    code, out, _err = _run(["data", "fetch", "cifar100", "--url", url, "-q"], capsys)
    assert code == 0 and "already present and verified" in out

    code, out, _err = _run(["data", "verify", "cifar100"], capsys)
    assert code == 0 and facts.md5 in out and "train 20, test 10 images; 100 classes" in out

    code, out, _err = _run(["data", "info", "--json", "-"], capsys)
    report = json.loads(out)
    entry = next(d for d in report["datasets"] if d["dataset"] == "cifar100")
    assert entry["present"] and entry["verified"] is True and entry["caches"]


def test_fetch_wikitext_extracts_the_tokens(workdir, monkeypatch, capsys):
    facts = wikitext_fixture(workdir / "usb")
    _use_facts(monkeypatch, facts)
    code, out, _err = _run(["data", "fetch", "wikitext2", "--url", (workdir / "usb" / facts.filename).as_uri(), "-q"], capsys)
    assert code == 0 and "extracted to" in out
    assert (workdir / "data" / "wikitext-2" / "wiki.train.tokens").is_file()
    code, out, _err = _run(["data", "verify", "wikitext2"], capsys)
    assert code == 0 and "tokens train 16, valid 9, test 11; vocabulary 19" in out


def test_verify_rejects_a_tampered_archive_with_exit_3(workdir, capsys):
    make_cifar_tarball(workdir / "data" / CIFAR100.filename)  # not the published bytes
    code, _out, err = _run(["data", "verify", "cifar100"], capsys)
    assert code == 3 and "is not the published cifar-100-python.tar.gz" in err and CIFAR100.md5 in err


def test_info_on_an_empty_folder_lists_names_and_checksums(workdir, capsys):
    code, out, _err = _run(["data", "info"], capsys)
    assert code == 0
    assert "cifar-100-python.tar.gz: missing" in out and CIFAR100.md5 in out and WIKITEXT2.md5 in out


def test_a_failed_offline_fetch_leaves_no_empty_data_folder(workdir, monkeypatch, capsys):
    """`kit data fetch` offline in a folder without ./data: exit 3, and no empty ./data left behind."""
    monkeypatch.setenv("KIT_DATA_MIRRORS", _closed_port_mirror())
    monkeypatch.delenv("KIT_DATA_DIR", raising=False)
    assert not (workdir / "data").exists()
    code, _out, err = _run(["data", "fetch", "cifar100", "--quiet"], capsys)
    assert code == 3, err
    assert not (workdir / "data").exists()
