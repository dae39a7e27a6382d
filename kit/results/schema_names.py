"""The names a results file may use: workloads, precisions, suites, models, engines, presets,
learners and ``--compile`` choices (what RunConfig and CellSpec accept), and the cell and run statuses."""

from __future__ import annotations

Workload = str  # one of: cifar, lstm, gpt (no typing.Literal: the cuda10 image runs this on Python 3.7)
Precision = str  # a name of kit.results.precisions.PRECISIONS (the precision modes' one list)
WORKLOADS: tuple[str, ...] = ("cifar", "lstm", "gpt")
#: ``--suite``: each workload, or "all" = cifar + lstm (the seed's two comparisons; gpt is
#: heavy and needs a recent GPU, so it runs only when asked for by name)
SUITES: tuple[str, ...] = ("cifar", "lstm", "gpt", "all")
CIFAR_MODELS: tuple[str, ...] = ("resnet18", "resnet34", "resnet50", "resnet101", "resnet152")
CIFAR_ENGINES: tuple[str, ...] = ("torch", "fastai")
LSTM_PRESETS: tuple[str, ...] = ("apex-2018", "tensor-core")
#: the LSTM engines: ``kit``, faithful to Apex's example (every kernel launched from Python, as its
#: users ran it); ``graphed``, the whole step of a bptt window replayed as one CUDA graph (what the GPU can do)
LSTM_ENGINES: tuple[str, ...] = ("kit", "graphed")
#: how the fastai engines build their Learner (``kit run --learner``): ``create_cnn`` = fastai's
#: create_cnn / cnn_learner / vision_learner (fastai's head on the torchvision body, the body frozen
#: as create_cnn leaves it), ``scratch`` = a plain ``Learner`` on the whole torchvision ResNet
FASTAI_LEARNERS: tuple[str, ...] = ("create_cnn", "scratch")
DEFAULT_FASTAI_LEARNER = "create_cnn"
#: --compile: auto (on for CUDA), on, off (no Inductor: the torch engine's captured step keeps
#: its eager kernels; elsewhere not compiled), eager (nothing captured or compiled)
COMPILE_CHOICES: tuple[str, ...] = ("auto", "on", "off", "eager")
#: the engines of each suite that has a choice of them (``--engines``)
SUITE_ENGINES: dict = {"cifar": CIFAR_ENGINES, "lstm": LSTM_ENGINES}
#: what the fastai cells recorded before the learner option existed trained: the plain Learner
LEARNER_BEFORE_THE_OPTION = "scratch"
GPT_PRESETS: tuple[str, ...] = ("gpt2-small", "gpt-1b", "gpt-2b", "tiny")
CellStatus = str  # one of: ok, skipped, failed, interrupted
RunStatus = str  # one of: running, complete, interrupted, failed
