"""`kit run`'s options are one typed object (kit.runner.options.RunOptions: its own fields, and each
suite's options class, its descriptor's): the Typer command, the cuda10 front end and `kit launch` all
read them, `kit launch` renders them back into the container's command line, and every one of them
reaches the run's config."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

import kit.runner.service as service
from kit.cli.main import app
from kit.errors import UsageError
from kit.runner import legacy
from kit.runner.option_checks import config_from_options
from kit.runner.options import RunOptions, option_specs, parse_args, smoke_preset, to_args

#: one command line that sets every option to a value other than its default
EVERY_OPTION = [
    "--suite", "all", "--data", "synthetic", "--device", "cuda:1", "-m", "resnet18,resnet34", "-m", "resnet50",
    "-p", "fp32", "-e", "torch", "--preset", "tensor-core", "--gpt-presets", "tiny", "--seq-len", "64", "--d-model", "32",
    "--n-layers", "2", "--n-heads", "4", "--train-split", "valid", "--epochs", "2", "--steps", "5", "--max-batches", "6",
    "--batch-size", "7", "--batch-sizes", "8,16", "--image-size", "64", "--repeats", "2", "--seed", "9", "--mode", "convergence",
    "--find-max-batch", "--compile", "off", "--no-profile-window", "--gpus", "2", "--global-batch-size", "64", "--scaling", "--isolate", "all", "--tolerance", "0.5", "--emsize", "10",
    "--nhid", "11", "--nlayers", "1", "--lr", "2.5", "--clip", "0.1", "--bptt", "8", "--dropout", "0.2",
    "--untied", "--static-loss-scale", "64", "--dynamic-loss-scale", "--learner", "scratch", "--data-dir", "/d", "--results-dir", "/r",
    "--resume", "/r/run", "--time-limit", "9m", "--smoke", "--skip-checks", "--dry-run",
]


def typer_options(monkeypatch, args: list[str]) -> RunOptions:
    """The RunOptions that `kit run ARGS` hands to the runner."""
    seen = []
    monkeypatch.setattr(service, "run_from_cli", lambda options, argv=None: seen.append(options))
    result = CliRunner().invoke(app, ["run", *args])
    assert result.exit_code == 0, result.output
    (options,) = seen
    return options


def test_every_option_is_set_by_the_command_line_used_here():
    options = parse_args(EVERY_OPTION)
    unset = [spec.name for spec in option_specs() if options.value(spec.name) == RunOptions().value(spec.name)]
    assert not unset, f"EVERY_OPTION misses {unset}"


def test_kit_run_and_the_cuda10_front_end_build_the_same_options(monkeypatch):
    from_typer = typer_options(monkeypatch, EVERY_OPTION)
    assert from_typer == parse_args(EVERY_OPTION)
    assert legacy.parse(["run", *[a for a in EVERY_OPTION if a != "--dry-run"]]) == parse_args(
        [a for a in EVERY_OPTION if a != "--dry-run"])


def test_kit_run_names_only_the_options_given_in_their_order(monkeypatch):
    options = typer_options(monkeypatch, ["--precisions", "fp32", "--suite", "cifar", "-p", "tf32"])
    assert options.given == ("precisions", "suite")  # --suite cifar is its default, but it was given
    assert options.precisions == ["fp32", "tf32"] and options.suite == "cifar" and options.value("models") is None
    assert options == parse_args(["--precisions", "fp32", "--suite", "cifar", "-p", "tf32"])


@pytest.mark.parametrize("args", [
    EVERY_OPTION,
    [],
    ["--suite", "cifar"],
    ["--tied", "--no-dynamic-loss-scale", "--lr", "1e-05"],
    ["-m", "resnet18", "--models", "resnet34,resnet50", "--device=cpu"],
    ["--seed", "-1", "--tolerance", "-0.5", "--models=-x"],  # values that look like flags (checked later)
    ["--resume", "results/some run", "--data-dir", "./data"],
], ids=["every-option", "none", "a-default-given", "yes-no-and-floats", "lists", "dash-values", "paths"])
def test_options_rendered_back_into_arguments_parse_to_the_same_options(args):
    options = parse_args(args)
    again = parse_args(to_args(options))
    assert again == options and again.given == options.given


def test_rendering_keeps_the_order_the_options_were_given():
    assert to_args(parse_args(["--device", "cpu", "--suite", "lstm", "--untied"])) == [
        "--device", "cpu", "--suite", "lstm", "--untied"]


def test_every_field_is_an_option_of_each_front_end():
    """Adding an option is adding a field: kit run, the cuda10 parser and the renderer follow."""
    run = typer.main.get_command(app).commands["run"]
    typer_names = {p.name for p in run.params}
    legacy_dests = {a.dest for a in legacy.parser()._actions}
    for spec in option_specs():
        assert spec.name in typer_names, spec.name
        assert (spec.name in legacy_dests) != spec.host_only, spec.name
        assert spec.help, f"{spec.name} has no help text"


def test_unknown_options_are_a_usage_error_naming_them():
    with pytest.raises(UsageError, match="--bogus") as info:
        parse_args(["--suite", "all", "--bogus"])
    assert info.value.exit_code == 2


def test_launch_parses_flags_exactly_as_kit_run_does_but_the_cuda10_image_keeps_abbreviations():
    with pytest.raises(UsageError):
        parse_args(["--ep", "3"])  # Click does not take abbreviations either
    assert legacy.parse(["run", "--ep", "3"]).value("epochs") == 3


def test_smoke_is_a_preset_of_the_options(tmp_path):
    given = parse_args(["--smoke", "--suite", "all", "-m", "resnet34", "--steps", "2", "--mode", "convergence",
                        "--compile", "auto", "--tolerance", "1", "--results-dir", str(tmp_path), "--data-dir", str(tmp_path)])
    preset = smoke_preset(given)
    assert (preset.mode, preset.data, preset.value("epochs"), preset.repeats, preset.tolerance) == (
        "throughput", "synthetic", 1, 1, None)
    assert preset.value("models") == ["resnet34"] and preset.steps == 2 and preset.compile == "eager"
    assert preset.precisions == ["fp32", "amp-bf16", "fp16-master"] and preset.batch_size == 32
    config = config_from_options(given)
    cifar, lstm = config.options_of("cifar"), config.options_of("lstm")
    assert (cifar.models, config.steps, cifar.epochs, config.repeats, config.mode) == (["resnet34"], 2, 1, 1, "throughput")
    assert config.engines == ["torch", "fastai"] and lstm.presets == ["apex-2018"] and lstm.max_batches == 5


def test_the_lstm_overrides_reach_the_config_under_their_names(tmp_path):
    options = parse_args(["--suite", "lstm", "--data", "synthetic", "--nhid", "12", "--untied", "--results-dir", str(tmp_path)])
    assert config_from_options(options).options_of("lstm").overrides() == {"nhid": 12, "tied": False}


@pytest.mark.parametrize("suite,args,flag", [
    ("cifar", ["--seq-len", "128"], "--seq-len"),
    ("cifar", ["--train-split", "valid"], "--train-split"),   # a GPT and LSTM option: no CIFAR cell reads it
    ("gpt", ["--epochs", "2"], "--epochs"),                  # the GPT suite counts steps
    ("gpt", ["-m", "resnet18"], "--models"),
    ("lstm", ["--image-size", "64"], "--image-size"),
    ("cifar", ["--nhid", "12"], "--nhid"),                    # an LSTM preset override
    ("gpt", ["--static-loss-scale", "64"], "--static-loss-scale"),
    ("lstm", ["--learner", "scratch"], "--learner"),
])
def test_an_option_of_another_suite_is_refused_not_ignored(tmp_path, suite, args, flag):
    options = parse_args(["--suite", suite, *args, "--results-dir", str(tmp_path / "r")])
    with pytest.raises(UsageError) as err:
        config_from_options(options)
    assert str(err.value).startswith(f"{flag} is an option of the ") and f"--suite {suite} has no cell" in str(err.value)
    assert not (tmp_path / "r").exists()


def test_options_of_the_suites_a_run_measures_are_taken(tmp_path):
    common = ["--data", "synthetic", "--results-dir", str(tmp_path)]
    config = config_from_options(parse_args(["--suite", "all", "-m", "resnet18", "--preset", "tensor-core",
                                             "--epochs", "2", "--nhid", "12", "--image-size", "64", *common]))
    cifar, lstm = config.options_of("cifar"), config.options_of("lstm")
    assert (cifar.models, lstm.presets, cifar.epochs, lstm.epochs, lstm.overrides(), cifar.image_size) == (
        ["resnet18"], ["tensor-core"], 2, 2, {"nhid": 12}, 64)
    config = config_from_options(parse_args(["--suite", "gpt", "--gpt-presets", "tiny", "--seq-len", "32", *common]))
    assert config.options_of("gpt").overrides() == {"seq_len": 32}
    # an option left at its default by the front end, not given, is not refused
    assert config_from_options(parse_args(["--suite", "gpt", *common])).options_of("gpt").overrides() == {}


def test_paths_default_to_the_environment_when_the_options_are_made(monkeypatch, tmp_path):
    monkeypatch.setenv("KIT_RESULTS_DIR", str(tmp_path / "r"))
    assert RunOptions().results_dir == Path(tmp_path / "r")


# -- kit launch forwards the object -----------------------------------------------------

from test_launch_run import JOURNAL, FakeClient, FakeContainer, _launch, results  # noqa: E402,F401


def test_launch_forwards_the_options_as_their_command_line(results):
    client = FakeClient(lambda r: FakeContainer(r, JOURNAL))
    args = ["--suite", "all", "-m", "resnet18", "--lr", "2", "--untied", "--seed=3"]
    _launch(results, client, gpu="0", stack="cuda12", skip_checks=True, run_args=args)
    (call,) = client.containers.calls
    assert call["command"] == ["run", "--suite", "all", "--models", "resnet18", "--lr", "2.0", "--untied", "--seed", "3",
                               "--device", "cuda:0"]
    assert parse_args(call["command"]) == parse_args(args).with_options(device="cuda:0")


def test_launch_takes_the_options_object_itself(results):
    client = FakeClient(lambda r: FakeContainer(r, JOURNAL))
    options = RunOptions().with_options(suite="lstm", device="cpu", max_batches=2)
    _launch(results, client, gpu="0", stack="cuda12", skip_checks=True, run_args=options)
    (call,) = client.containers.calls
    assert call["command"] == ["run", "--suite", "lstm", "--device", "cpu", "--max-batches", "2"]
    assert call["device_requests"] == []  # --device cpu: no GPU for the container


def test_launch_options_that_do_not_parse_stop_before_anything_starts(results):
    client = FakeClient(lambda r: FakeContainer(r, JOURNAL))
    with pytest.raises(UsageError, match="--epochs") as info:
        _launch(results, client, gpu="0", stack="cpu", skip_checks=True, run_args=["--epochs", "x"])
    assert info.value.exit_code == 2
    assert client.containers.calls == [] and not results.exists()
    # an option of another suite is refused on the host too, before a container starts
    with pytest.raises(UsageError, match="--epochs is an option of the cifar and lstm suites") as info:
        _launch(results, client, gpu="0", stack="cpu", skip_checks=True, run_args=["--suite", "gpt", "--epochs", "2"])
    assert info.value.exit_code == 2
    assert client.containers.calls == [] and not results.exists()


def test_engines_of_no_suite_of_the_run_are_refused_and_each_suite_reads_its_own(tmp_path):
    from kit.runner.option_checks import options_for_suite

    with pytest.raises(UsageError, match="--engines torch: no engine of --suite lstm"):
        config_from_options(parse_args(["--suite", "lstm", "--engines", "torch", "--results-dir", str(tmp_path / "r")]))
    config = config_from_options(parse_args(["--suite", "all", "--engines", "torch,graphed", "--data", "synthetic",
                                             "--device", "cpu", "--results-dir", str(tmp_path / "r")]))
    from kit.runner.plan import build_plan

    engines = {(c.workload, c.engine) for c in build_plan(config).cells}
    assert engines == {("cifar", "torch"), ("lstm", "graphed")}
    # a sweep's LSTM task given CIFAR's engines only runs its own defaults (the option is left out for it)
    given = parse_args(["--engines", "torch", "--data", "synthetic", "--results-dir", str(tmp_path / "r")])
    kept, dropped = options_for_suite(given, "lstm")
    assert dropped == ["--engines"] and kept.engines is None
    assert options_for_suite(given, "cifar")[1] == []
