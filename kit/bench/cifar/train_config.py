"""One CIFAR cell's training knobs (from CellSpec.params), shared by every engine."""

from __future__ import annotations

from dataclasses import dataclass

from kit.results.schema_names import COMPILE_CHOICES, DEFAULT_FASTAI_LEARNER, FASTAI_LEARNERS


@dataclass
class TrainConfig:
    """One cell's training knobs (from CellSpec.params), shared by both engines."""

    model: str
    precision: str
    device: str
    batch_size: int = 256
    image_size: int = 32
    epochs: int = 1
    #: steps per epoch (throughput mode); None = full epochs over the training set
    steps: int | None = None
    compile: str = "auto"  # COMPILE_CHOICES
    seed: int = 0
    #: evaluate test accuracy after every epoch (convergence mode)
    evaluate: bool = False
    lr: float | None = None
    label_smoothing: float = 0.0
    momentum: float = 0.9
    weight_decay: float = 5e-4
    warmup_steps: int | None = None
    #: untimed steps before a cell's first repeat (None = auto: on CUDA, the repeat's own
    #: warm-up plus one; on the CPU none); see run_repeats
    untimed_warmup_steps: int | None = None
    num_classes: int = 100
    #: fastai engine only: DataLoader worker processes (None = auto)
    num_workers: int | None = None
    #: fastai engines' fp16-master: False (default) = the 2019 article's to_fp16(), fastai
    #: 1.0.38-1.0.42: a static loss scale with no overflow check; True = fastai's later
    #: dynamic scaling (1.0.61's to_fp16(), fastai 2's to_non_native_fp16() default)
    dynamic_loss_scale: bool = False
    #: that static scale (fastai's default, 512)
    static_loss_scale: float = 512.0
    #: fastai engines only (the torch engine ignores it): "create_cnn" = fastai's create_cnn
    #: learner (fastai's head on the torchvision body, the body frozen as create_cnn leaves it),
    #: "scratch" = a plain Learner on the whole torchvision ResNet
    learner: str = DEFAULT_FASTAI_LEARNER

    def __post_init__(self) -> None:
        if self.compile not in COMPILE_CHOICES:
            raise ValueError(f"compile must be one of {', '.join(COMPILE_CHOICES)}")
        if self.learner not in FASTAI_LEARNERS:
            raise ValueError(f"learner must be one of {', '.join(FASTAI_LEARNERS)}")

    def steps_per_epoch(self, n_train: int) -> int:
        return self.steps if self.steps else max(1, n_train // self.batch_size)

    def max_lr(self) -> float:
        # SGD + Nesterov one-cycle peak, scaled linearly from 0.2 at batch 256
        return self.lr if self.lr is not None else min(0.8, 0.2 * self.batch_size / 256)
