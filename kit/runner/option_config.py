"""RunOptions turned into the run's RunConfig: :func:`config_from_options` (every check first),
the ``--smoke`` preset, and the LSTM, GPT and data-parallel options as RunConfig's fields.

Python 3.7 syntax (the cuda10 image imports this module): typing's ``Optional``/``List``.
"""

from dataclasses import replace

from kit.errors import UsageError
from kit.results import precisions as precision_modes
from kit.results.schema import RunConfig
from kit.results import suites
from kit.runner.option_checks import check_engines, check_options, check_precisions
from kit.runner.option_fields import GPT_OVERRIDES, LSTM_OVERRIDES, RunOptions
from kit.runner.option_parsing import normalise_device, parse_batch_sizes, split_names

def smoke_preset(options: RunOptions) -> RunOptions:
    """``--smoke``: the smallest sanity run. Each suite's descriptor gives its own smoke settings
    (models, engines, presets, steps, batches: kit.results.suites), the precisions are the smoke
    modes of kit.results.precisions; options given keep their value. Mode, data, epochs and
    repeats are fixed; ``--compile auto`` is off (compiling costs more than 4 steps measure)."""
    run = suites.run_by(options.suite)
    own = {}
    for s in run:
        own.update({k: v for k, v in s.smoke.items() if k not in own})
    return replace(
        options,
        mode="throughput",
        data="synthetic",
        precisions=options.precisions or precision_modes.smoke([s.name for s in run]),
        **{k: getattr(options, k) or v for k, v in own.items()},
        epochs=1,
        batch_size=options.batch_size or (None if options.batch_sizes else 32),
        repeats=1,
        find_max_batch=False,
        compile="eager" if options.compile == "auto" else options.compile,
        tolerance=None,
    )


def config_from_options(options: RunOptions, argv=None) -> RunConfig:
    """Every option of `kit run` checked in one place (UsageError, exit 2), before anything is
    printed or written, and turned into the run's RunConfig (``--smoke``: :func:`smoke_preset`)."""
    check_options(options)
    device = normalise_device(options.device)
    if options.smoke:
        options = smoke_preset(options)
    config = RunConfig(
        suite=options.suite,
        mode=options.mode,
        device=device,
        data=options.data,
        data_dir=str(options.data_dir),
        models=split_names(options.models, "--models"),
        precisions=split_names(options.precisions, "--precisions"),
        engines=split_names(options.engines, "--engines"),
        presets=split_names(options.presets, "--preset"),
        gpt_presets=split_names(options.gpt_presets, "--gpt-presets"),
        gpt=gpt_overrides(options),
        epochs=options.epochs,
        steps=options.steps,
        max_batches=options.max_batches,
        batch_size=options.batch_size,
        batch_sizes=parse_batch_sizes(options.batch_sizes),
        image_size=options.image_size,
        repeats=options.repeats,
        seed=options.seed,
        find_max_batch=options.find_max_batch,
        compile=options.compile,
        tolerance=options.tolerance,
        lstm=lstm_overrides(options),
        command_line=list(argv or []),
        isolate=options.isolate or "apex",
        learner=options.learner,
        **data_parallel_options(options),
    )
    check_engines(config)
    check_precisions(config)
    return config


def data_parallel_options(options: RunOptions) -> dict:
    """--gpus, --global-batch-size, --scaling as RunConfig fields (checked there)."""
    if options.global_batch_size is not None and options.batch_size is not None:
        raise UsageError("give --batch-size (per GPU) or --global-batch-size, not both.")
    return {"gpus": options.gpus, "global_batch_size": options.global_batch_size, "scaling": bool(options.scaling)}


def gpt_overrides(options: RunOptions) -> dict:
    """The GPT preset's overrides that were set (RunConfig.gpt)."""
    return {name: getattr(options, name) for name in GPT_OVERRIDES if getattr(options, name) is not None}


def lstm_overrides(options: RunOptions) -> dict:
    """The LSTM preset's overrides that were set (RunConfig.lstm, keyed as the preset's keys)."""
    return {name: getattr(options, name) for name in LSTM_OVERRIDES if getattr(options, name) is not None}
