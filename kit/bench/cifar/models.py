"""The ResNets both engines train: torchvision's, unchanged, with 100 classes.

The 2019 seed article's fastai used torchvision's ResNet-18..152, so both engines
build exactly these (no CIFAR-specific stem). If torchvision is missing we say so;
we never substitute another architecture.
"""

from __future__ import annotations

from torch import nn

from kit.bench.cifar.plan import MODELS
from kit.errors import EnvironmentCheckError



class ModelUnavailable(EnvironmentCheckError):
    """torchvision (the source of the architectures) cannot be imported."""


def torchvision_missing_reason() -> str | None:
    """None when torchvision imports; otherwise why not (recorded as a skip reason)."""
    try:
        import torchvision.models  # noqa: F401
    except Exception as exc:  # ImportError, or a torch/torchvision version mismatch
        return f"torchvision cannot be imported ({exc.__class__.__name__}: {exc}); the CIFAR suite needs its ResNets"
    return None


def torchvision_arch(name: str):
    """torchvision's constructor for ``name`` (``torchvision.models.resnet18`` ...): what fastai's
    create_cnn / vision_learner take as ``arch`` (fastai keys its cut and layer groups on it)."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose from {', '.join(MODELS)}")
    reason = torchvision_missing_reason()
    if reason:
        raise ModelUnavailable(reason, remedy="Install the torchvision that matches your torch (kit doctor shows both).")
    import torchvision.models as tvm

    return getattr(tvm, name)


def build(name: str, num_classes: int = 100) -> nn.Module:
    """A freshly initialised torchvision ResNet (no pretrained weights)."""
    import inspect

    ctor = torchvision_arch(name)
    if "weights" in inspect.signature(ctor).parameters:
        return ctor(weights=None, num_classes=num_classes)
    # torchvision before 0.13 (the cuda10 image's 0.5): the same models, older switch
    return ctor(pretrained=False, num_classes=num_classes)
