"""`kit run`'s options as one typed object, from the command line to the engine.

:class:`RunOptions` has one field per option of `kit run`; each field carries its type,
its default, its flag(s) and its help text (:func:`option`). The three front ends read
these fields and keep no list of their own, so adding an option is adding one field::

    kit.cli.run           the Typer command `kit run` (a parameter per field)      -> RunOptions
    kit.runner.legacy     the cuda10 image's argparse front end: parse_args          -> RunOptions
    kit.launch.launcher   `kit launch`: parse_args on the host, to_args back into
                          the container's command line (the same object, rendered)

    RunOptions --config_from_options: smoke_preset (--smoke), every check (exit 2)--> RunConfig
        (kit.results.schema) --> kit.runner.plan.build_plan --> a CellSpec per cell --> the engine

Checks live in :func:`config_from_options` (with RunConfig's own), and run before anything
is printed or written; the object itself is only parsed values, so `kit launch` can carry
paths that exist in the container only.

Where each part lives (every name stays importable from here)::

    kit.runner.option_fields    RunOptions, option(), OptionSpec, option_specs()
    kit.runner.option_parsing   parse_args, to_args, argument_parser; split_list, split_names,
                                normalise_device, parse_batch_sizes
    kit.runner.option_checks    check_options and the other checks; options_for_suite
    kit.runner.option_config    config_from_options, smoke_preset, the preset overrides

Python 3.7 syntax (the cuda10 image imports this module): typing's ``Optional``/``List``.
"""

from kit.runner.option_checks import (RESUME_NEUTRAL, check_batch_curve, check_engines, check_gpt_settings,
                                      check_lstm_settings, check_options, check_results_dir, check_resume_options,
                                      check_suite_options, engines_of_suite, nearest_existing, options_for_suite)
from kit.runner.option_config import (config_from_options, data_parallel_options, gpt_overrides, lstm_overrides,
                                      smoke_preset)
from kit.runner.option_fields import (CIFAR_ONLY, GPT_ONLY, GPT_OVERRIDES, LSTM_ONLY, LSTM_OVERRIDES, PATH_OPTIONS,
                                      RUN_SUITES, SUITES, OptionSpec, RunOptions, option, option_specs)
from kit.runner.option_parsing import (DEVICE_PATTERN, argument_parser, normalise_device, parse_args,
                                       parse_batch_sizes, split_list, split_names, to_args)

__all__ = [
    # option_fields
    "SUITES", "GPT_OVERRIDES", "RUN_SUITES", "CIFAR_ONLY", "LSTM_ONLY", "GPT_ONLY", "PATH_OPTIONS", "LSTM_OVERRIDES",
    "option", "RunOptions", "OptionSpec", "option_specs",
    # option_parsing
    "argument_parser", "parse_args", "to_args", "DEVICE_PATTERN", "split_names", "normalise_device",
    "parse_batch_sizes", "split_list",
    # option_checks
    "engines_of_suite", "check_engines", "check_gpt_settings", "check_batch_curve", "check_suite_options",
    "options_for_suite", "RESUME_NEUTRAL", "check_resume_options", "check_options", "check_results_dir",
    "nearest_existing", "check_lstm_settings",
    # option_config
    "smoke_preset", "config_from_options", "data_parallel_options", "gpt_overrides", "lstm_overrides",
]
