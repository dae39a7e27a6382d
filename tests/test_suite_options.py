"""A suite owns its options and a data set is one entry: a suite's options class (its descriptor's)
is read by `kit run` and its `--help`, `kit launch`, the cuda10 front end, the run's config, the plan
and the resume check; every option of `kit run` reaches the run's config; a data set is one module of
kit/data/sets/ that `kit data` and `kit run` find. A toy suite with two options of its own, reading a
toy data set, is added to a copy of the kit as two folders and run to a bundle."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

import pytest

from fixtures.kit_copy import ROOT, copy_kit, two_runs_compared
from fixtures.results.factory import make_cell, make_env, make_results
from kit.errors import UsageError
from kit.results import suites
from kit.results.option_fields import option
from kit.results.schema import RunConfig, RunResults
from kit.runner.option_checks import NOT_IN_CONFIG, config_from_options
from kit.runner.options import RunOptions, option_specs, parse_args, to_args

#: a value other than the default for the options whose values are constrained (the rest are made
#: from their type by _value)
SAMPLES = {"suite": None, "data": "synthetic", "device": "cpu", "mode": "convergence", "compile": "off",
           "isolate": "all", "precisions": "fp32", "engines": None, "models": "resnet18", "presets": "tensor-core",
           "gpt_presets": "tiny", "image_size": "64", "learner": "scratch", "train_split": "valid",
           "batch_size": None, "batch_sizes": "8,16", "global_batch_size": "4", "gpus": "2", "data_dir": "/d",
           "tolerance": "0.5", "time_limit": "9m", "resume": "/r/run"}


def _value(spec) -> list:
    """Arguments that set ``spec`` to a value other than its default."""
    sample = SAMPLES.get(spec.name, "")
    if sample is None:
        return []
    if spec.kind == "switch":
        return [spec.flag]
    if spec.kind == "yes-no":
        return [spec.off]
    return [spec.flag, sample or {int: "2", float: "0.25", str: "x"}.get(spec.type, "x")]


#: what an option needs beside it to be taken (the data-parallel options apply with --gpus only)
COMPANIONS = {"global_batch_size": ["--gpus", "2"], "scaling": ["--gpus", "2"]}


def _config_of(suite: str, spec):
    argv = ["--suite", suite, *_value(spec), *COMPANIONS.get(spec.name, [])]
    return config_from_options(parse_args(argv), argv)


def test_every_run_option_reaches_the_config():
    """Each option of `kit run` (its own and every suite's) set on the command line is in the run's
    config: a RunConfig field, or its suite's options (RunConfig.options_of); only the options that shape
    the command and not the run (NOT_IN_CONFIG) are not. Adding an option that goes nowhere fails here."""
    for spec in option_specs():
        if spec.name in NOT_IN_CONFIG or SAMPLES.get(spec.name, "") is None:
            continue
        for suite in spec.suites or ("cifar",):
            config = _config_of(suite, spec)
            kept = getattr(config, spec.name) if not spec.suites else getattr(config.options_of(suite), spec.name)
            assert kept not in (spec.default, None, []), (spec.name, suite, kept)


def test_the_config_names_no_option_it_does_not_keep():
    """Every one of `kit run`'s own options but NOT_IN_CONFIG has a RunConfig field, and the run's
    config keeps nothing of a suite that is not in the run."""
    fields = set(RunConfig.__dataclass_fields__)
    assert [s.name for s in option_specs() if not s.suites and s.name not in NOT_IN_CONFIG and s.name not in fields] == []
    config = config_from_options(parse_args(["--suite", "lstm", "--data", "synthetic", "--nhid", "12"]))
    assert set(config.suite_options) == {"lstm"} and config.options_of("lstm").nhid == 12


def test_a_shared_option_is_one_flag_set_in_each_suite_that_has_it():
    epochs = next(s for s in option_specs() if s.name == "epochs")
    assert epochs.suites == ("cifar", "lstm") and "CIFAR:" in epochs.help and "LSTM:" in epochs.help
    options = parse_args(["--suite", "all", "--epochs", "2"])
    assert options.own["cifar"].epochs == options.own["lstm"].epochs == 2 and options.given == ("suite", "epochs")
    assert to_args(options) == ["--suite", "all", "--epochs", "2"]


def test_a_suite_option_is_checked_by_its_own_class():
    with pytest.raises(UsageError, match="unknown --image-size 33; choose 32, 64, 128 or 224"):
        config_from_options(parse_args(["--image-size", "33", "--data", "synthetic"]))
    with pytest.raises(UsageError, match="--max-batches must be at least 1"):
        config_from_options(parse_args(["--suite", "lstm", "--max-batches", "0", "--data", "synthetic"]))


def test_a_config_recorded_before_suites_owned_their_options_reads_the_same():
    """A results file of an older kit: the suites' options at the top level of its config, the LSTM's
    and GPT's preset overrides in dicts of their own (each option's ``recorded_in``)."""
    d = make_results([make_cell()], make_env())
    d["config"].pop("suite_options")
    d["config"].update(suite="all", models=["resnet18"], presets=["tensor-core"], epochs=2, image_size=64,
                       learner="scratch", lstm={"nhid": 12, "tied": False, "static_loss_scale": 64.0})
    config = RunResults.from_dict(d).config
    cifar, lstm = config.options_of("cifar"), config.options_of("lstm")
    assert (cifar.models, cifar.epochs, cifar.image_size, cifar.learner, cifar.static_loss_scale) == (
        ["resnet18"], 2, 64, "scratch", 64.0)
    assert lstm.overrides() == {"nhid": 12, "tied": False, "static_loss_scale": 64.0} and lstm.presets == ["tensor-core"]
    assert RunConfig.from_dict(config.to_dict()) == config  # and the new layout reads back the same


def test_a_recorded_suite_option_of_the_wrong_type_is_a_schema_error(tmp_path):
    from kit.errors import SchemaError
    from kit.results.schema import load_results

    d = make_results([make_cell()], make_env())
    d["config"]["suite_options"]["cifar"]["image_size"] = "big"
    (tmp_path / "r.json").write_text(json.dumps(d))
    with pytest.raises(SchemaError, match=r"at config: suite_options.cifar.image_size: str, not int"):
        load_results(tmp_path / "r.json")


@dataclass
class _Clashing:
    epochs: Optional[str] = option(None, "a plugin's --epochs of another type")


@dataclass
class _Own:
    toy_layers: Optional[List[str]] = option(None, "a plugin's own option")


def test_a_plugin_whose_option_clashes_is_set_aside_and_the_others_keep_theirs(monkeypatch):
    from kit.runner import options as run_options

    builtin = suites.all_suites()
    plugin = builtin[0]._replace(name="clash", options=_Clashing, plugin="clash-plugin 1.0", in_all=False)
    fine = builtin[0]._replace(name="fine", options=_Own, plugin="fine-plugin 2.0", in_all=False)
    monkeypatch.setattr(suites, "_FOUND", list(builtin) + [plugin, fine])
    monkeypatch.setattr(suites, "_BROKEN", {})
    monkeypatch.setattr(run_options, "_SPECS", [])
    specs = {s.name: s for s in option_specs()}
    assert specs["epochs"].suites == ("cifar", "lstm") and specs["toy_layers"].suites == ("fine",)
    assert suites.find("clash") is None and "clash" not in suites.choices()
    assert suites.broken()["clash"] == ("suite plugin 'clash' (clash-plugin 1.0): its option --epochs differs from "
                                        "the cifar and lstm suite's (type, flags or default); an option several "
                                        "suites have is declared alike")
    with pytest.raises(UsageError, match="suite plugin 'clash'"):
        config_from_options(RunOptions().with_options(suite="clash"))
    monkeypatch.setattr(run_options, "_SPECS", [])


# -- a toy suite with two options of its own and a toy data set, added to a copy of the kit -------------

TOY_DATA = '''"""A toy data set for the kit's own test: numbers in a text file (its facts are the test's)."""

from kit.data.registry import DataSet
from kit.data.files import checksum_check, require_ok, resolve_data_dir, verify_file
from kit.facts.datasets import DatasetFacts

FACTS = DatasetFacts(name="toyset", title="Toy numbers", filename="toy.txt", md5="{md5}", sha256=None,
                     mirrors=("{url}",), homepage="(the kit's test)", sizes={{"numbers": 64}})


def load(data_dir, source="real", seed=0):
    if source == "synthetic":
        return synthetic(seed)
    path = resolve_data_dir(data_dir) / FACTS.filename
    require_ok(verify_file(path, FACTS), FACTS)
    return [float(x) for x in path.read_text().split()]


def synthetic(seed=0):
    return [float((seed * 7 + i) % 13) for i in range(64)]


def verify(folder, facts):
    ver = verify_file(folder / facts.filename, facts, trust_stamp=False)
    require_ok(ver, facts)
    return [checksum_check(ver, facts), {{"check": "sizes", "ok": True, "detail": f"{{len(load(folder))}} numbers"}}]


DATASET = DataSet(facts=FACTS, help="64 numbers in a text file", load=load, synthetic=synthetic, verify=verify)
'''

TOY_SUITE = '''"""A toy suite for the kit's own test: a linear layer's SGD steps on the toy data set, on the CPU."""

import time
from dataclasses import dataclass
from typing import List, Optional

from kit.bench import methods
from kit.results.option_fields import at_least, option
from kit.results.schema import CellResult, CellSpec
from kit.results.stats import summarise_repeats
from kit.results.suites import Parity, Suite


@dataclass
class ToyOptions:
    toy_width: int = option(16, "toy: the layer's width.", check=at_least(1))
    toy_tags: Optional[List[str]] = option(None, "toy: tags recorded with each cell (comma-separated).")


def cells(config):
    own = config.options_of("toy")
    params = {"steps": config.steps or 20, "batch_size": 8, "width": own.toy_width, "tags": own.toy_tags or []}
    return [CellSpec("toy", "linear", p, "kit", dict(params)) for p in config.precisions or ["fp32", "amp-bf16"]]


def work(spec, mode):
    return 6.0 * spec.params["width"] ** 2 * spec.params["batch_size"] * spec.params["steps"]


def run_cell(spec, ctx):
    import torch

    from kit.data.registry import dataset

    numbers = dataset("toyset").load(ctx.data_dir, ctx.data_source, ctx.seed)
    width, batch = spec.params["width"], spec.params["batch_size"]
    torch.manual_seed(ctx.seed)
    model = torch.nn.Linear(width, width)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.tensor(numbers[:width], dtype=torch.float32).repeat(batch, 1) / 13
    dtype = torch.bfloat16 if spec.precision == "amp-bf16" else None
    repeats = []
    for r in range(ctx.repeats):
        start = time.perf_counter()
        for _ in range(spec.params["steps"]):
            with torch.autocast("cpu", dtype=dtype, enabled=dtype is not None):
                loss = model(x).float().pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        took = time.perf_counter() - start
        repeats.append({"repeat": r, "epoch_s": took, "throughput_items_per_s": batch * spec.params["steps"] / took,
                        "final_metric": float(loss)})
    return CellResult(spec.workload, spec.model, spec.precision, spec.engine, "ok", params=spec.params,
                      throughput_unit="samples", repeats=repeats, summary=summarise_repeats(repeats),
                      data={"numbers": len(numbers), "source": ctx.data_source},
                      method=methods.record("toy/kit", {"width": width, "batch_size": batch}))


SUITE = Suite(name="toy", help="a linear layer on toy numbers, for the kit's own test", title="Toy layer ({engine})",
              models=("linear",), engines=("kit",), plan=cells, work=work, runner="kit.bench.toy", options=ToyOptions,
              datasets=("toyset",), parity=Parity("final loss"), unit="samples",
              revisions={"kit": (1, ((1, "SGD steps of a Linear"),))})
'''


def _kit_with_toys(tmp_path: Path):
    """A copy of the kit with two folders added, kit/bench/toy/ and kit/data/sets/toyset/, and nothing
    else changed; the toy data set's one mirror is a file beside it."""
    numbers = " ".join(str(i % 13) for i in range(64)) + "\n"
    (tmp_path / "mirror").mkdir()
    (tmp_path / "mirror" / "toy.txt").write_text(numbers)
    kit = copy_kit(tmp_path)
    md5 = hashlib.md5(numbers.encode()).hexdigest()
    for folder, text in (("kit/bench/toy", TOY_SUITE), ("kit/data/sets/toyset", TOY_DATA.format(
            md5=md5, url=(tmp_path / "mirror" / "toy.txt").as_uri()))):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "__init__.py").write_text(text, encoding="utf-8")
    return kit


def test_a_suite_with_options_of_its_own_and_a_data_set_are_a_folder_each(tmp_path):
    kit = _kit_with_toys(tmp_path)
    help_text = " ".join(kit("run", "--help").split())
    assert "Options of the toy suite: --toy-width <int> toy: the layer's width." in help_text
    assert "toyset: Toy numbers, 64 numbers in a text file" in " ".join(kit("data", "--help").split())
    bundles, show, rows = two_runs_compared(kit, tmp_path, "--suite", "toy", "--device", "cpu", "--repeats", "2",
                                            "--skip-checks", "--toy-width", "8", "--toy-tags", "a,b",
                                            "--data-dir", str(tmp_path / "data"))
    assert "toy/linear/fp32/kit" in show and rows["toy/linear/amp-bf16/kit"]["machines"]["A"]["speedup_vs_fp32"]["ratio"] > 0
    (run_dir,) = [p for p in (tmp_path / "results-a").iterdir() if p.is_dir()]
    results = json.loads((run_dir / "results.json").read_text())
    assert results["config"]["suite_options"] == {"toy": {"toy_width": 8, "toy_tags": ["a", "b"]}}
    assert {c["params"]["width"] for c in results["cells"]} == {8} and results["cells"][0]["data"]["source"] == "real"
    # the data set was fetched from its mirror into the data folder, and kit data reads it from its entry
    assert "toy.txt: present" in kit("data", "info", "--data-dir", str(tmp_path / "data"))
    assert "64 numbers" in kit("data", "verify", "toyset", "--data-dir", str(tmp_path / "data"))


def test_a_toy_suites_options_are_refused_elsewhere_and_checked(tmp_path):
    _kit_with_toys(tmp_path)
    env = {"PYTHONPATH": str(tmp_path), "COLUMNS": "200", "PATH": "/usr/bin:/bin"}
    for args, words in ((["--toy-width", "0"], "--toy-width must be at least 1"),
                        (["--suite", "cifar", "--toy-width", "8"], "--toy-width is an option of the toy suite")):
        done = subprocess.run([sys.executable, "-m", "kit", "run", "--suite", "toy", "--dry-run", "--data", "synthetic",
                               *args], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
        errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
        assert done.returncode == 2 and len(errors) == 1 and words in errors[0], done.stderr


def test_no_module_of_the_kit_lists_the_data_sets():
    """The data sets' names appear only in their own entries (kit/data/sets/), the facts they cite and
    the suites that read them (kit/bench/<suite>/: a descriptor's ``datasets``)."""
    import re

    allowed = {"kit/facts/datasets.py"}
    found = []
    for path in sorted((ROOT / "kit").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel in allowed or rel.startswith(("kit/data/sets/", "kit/bench/")):
            continue
        text = path.read_text(encoding="utf-8")
        found += [f"{rel}: {m}" for m in re.findall(r"""["'](?:cifar100|wikitext2)["']""", text)]
    assert not found, found


def test_an_option_of_kit_run_without_a_config_field_is_an_error_not_a_silent_drop(tmp_path):
    """The drop the options once had: a field added to RunOptions and not to RunConfig went nowhere,
    and the run measured what its command line did not say. Now config_from_options refuses it."""
    copy_kit(tmp_path)
    path = tmp_path / "kit" / "runner" / "options.py"
    text = path.read_text(encoding="utf-8")
    anchor = "    smoke: bool = option("
    path.write_text(text.replace(anchor, '    warp: Optional[int] = option(None, "A new option.")\n' + anchor, 1),
                    encoding="utf-8")
    env = {"PYTHONPATH": str(tmp_path), "COLUMNS": "200", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-m", "kit", "run", "--warp", "3", "--dry-run", "--data", "synthetic"],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert done.returncode != 0 and "kit run's option(s) warp have no RunConfig field" in done.stderr, done.stderr
