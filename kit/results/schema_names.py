"""The names a results file may use beyond the suites' own (kit.results.suites: workloads, models,
engines, presets) and the precisions' (kit.results.precisions): learners and ``--compile`` choices."""

from __future__ import annotations

Precision = str  # a name of kit.results.precisions.PRECISIONS, the modes' one list (no typing.Literal: Python 3.7 reads this)
#: how the fastai engines build their Learner (``kit run --learner``): ``create_cnn`` = fastai's
#: create_cnn / cnn_learner / vision_learner (fastai's head on the torchvision body, the body frozen
#: as create_cnn leaves it), ``scratch`` = a plain ``Learner`` on the whole torchvision ResNet
FASTAI_LEARNERS: tuple[str, ...] = ("create_cnn", "scratch")
DEFAULT_FASTAI_LEARNER = "create_cnn"
#: --compile: auto (on for CUDA), on, off (no Inductor: the torch engine's captured step keeps
#: its eager kernels; elsewhere not compiled), eager (nothing captured or compiled)
COMPILE_CHOICES: tuple[str, ...] = ("auto", "on", "off", "eager")
#: what the fastai cells recorded before the learner option existed trained: the plain Learner
LEARNER_BEFORE_THE_OPTION = "scratch"
