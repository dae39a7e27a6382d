"""fastai transforms for the fastai engine (imported only when that engine runs).

No ``from __future__ import annotations`` here on purpose: fastai dispatches
``encodes`` on the *evaluated* type annotation (``TensorImage``), and string
annotations would not resolve.
"""

import random

import torch
import torch.nn.functional as F
from fastai.data.transforms import DisplayedTransform
from fastai.torch_core import TensorImage
from fastai.vision.augment import RandTransform

from kit.bench.cifar.gpu_data import PAD, crop_flip_indices


class PadCropFlip(RandTransform):
    """Reflect-pad by 4, random crop back to the image size, random horizontal flip,
    per image on the CPU: fastai v1's
    ``[*rand_pad(4, 32), flip_lr(p=0.5)]``, with the torch engine's index rule."""

    # split_idx None = always apply: the kit adds this transform to the training
    # DataLoader only (fastai's split_idx=0 needs a fastai Datasets, which we do not use)
    split_idx, order = None, 5

    def before_call(self, b, split_idx):
        self.dy, self.dx = random.randint(0, 2 * PAD), random.randint(0, 2 * PAD)
        self.flip = random.random() < 0.5

    def encodes(self, x: TensorImage):
        _, h, w = x.shape
        rows, cols = crop_flip_indices(torch.tensor([self.dy]), torch.tensor([self.dx]), torch.tensor([self.flip]), h, w, PAD)
        return x[:, rows[0][:, None], cols[0][None, :]]


class Upsample(DisplayedTransform):
    """Bilinear upsampling of the normalised batch on the device (after Normalize)."""

    order = 100

    def __init__(self, size):
        self.size = size

    def encodes(self, x: TensorImage):
        return TensorImage(F.interpolate(x, size=(self.size, self.size), mode="bilinear", align_corners=False))
