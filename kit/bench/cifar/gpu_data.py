"""The data set resident on the device, and augmentation as tensor indexing.

The whole CIFAR-100 training set is 50,000 x 3 x 32 x 32 uint8 = 150 MB: it
fits on any GPU, so the torch engine uploads it once and never touches the CPU
again (the airbench / hlb-CIFAR10 recipe). Augmentation is the standard CIFAR
one, random 32x32 crop from the image reflect-padded by 4 pixels, and a random
horizontal flip, done for a whole batch by one gather::

    padded (virtual)  40 x 40          crop at (dy, dx), flip
    +----------------------+           rows = reflect(dy - 4 + [0..31])
    | mirror               |           cols = reflect(dx - 4 + [0..31])   (reversed when flipped)
    |    +----------+      |           out[n, c, i, j] = x[n, c, rows[n, i], cols[n, j]]
    |    |  image   |      |
    |    +----------+      |           No padded copy is ever made: reflection is
    +----------------------+           folded into the indices.

The fastai engine applies the same index arithmetic per image inside its CPU
workers (``fastai_engine.PadCropFlip``), so both engines see the same
augmentation distribution.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

PAD = 4


def reflect(i: torch.Tensor, n: int) -> torch.Tensor:
    """Map indices in [-(n-1), 2(n-1)] onto [0, n-1] by mirror reflection (no edge repeat),
    the same rule as ``numpy.pad(mode="reflect")`` and ``F.pad(mode="reflect")``."""
    i = i.abs()
    return torch.where(i > n - 1, 2 * (n - 1) - i, i)


def crop_flip_indices(dy: torch.Tensor, dx: torch.Tensor, flip: torch.Tensor, h: int, w: int, pad: int = PAD) -> tuple[torch.Tensor, torch.Tensor]:
    """Row (N, h) and column (N, w) source indices for crops at offsets (dy, dx) in
    the padded frame (0..2*pad), columns reversed where ``flip``."""
    ar_h = torch.arange(h, device=dy.device)
    ar_w = torch.arange(w, device=dx.device)
    rows = reflect(dy[:, None] - pad + ar_h[None, :], h)
    cols_fwd = dx[:, None] - pad + ar_w[None, :]
    cols_rev = dx[:, None] - pad + (w - 1 - ar_w)[None, :]
    cols = reflect(torch.where(flip[:, None], cols_rev, cols_fwd), w)
    return rows, cols


def augment(x: torch.Tensor, generator: torch.Generator | None = None, pad: int = PAD) -> torch.Tensor:
    """Random reflect-pad-and-crop plus horizontal flip for a batch (N, C, H, W), any dtype.

    Vectorised over the batch: three random draws and one advanced-indexing gather."""
    n, c, h, w = x.shape
    dev = x.device
    dy = torch.randint(0, 2 * pad + 1, (n,), device=dev, generator=generator)
    dx = torch.randint(0, 2 * pad + 1, (n,), device=dev, generator=generator)
    flip = torch.randint(0, 2, (n,), device=dev, generator=generator).bool()
    rows, cols = crop_flip_indices(dy, dx, flip, h, w, pad)
    ni = torch.arange(n, device=dev)[:, None, None, None]
    ci = torch.arange(c, device=dev)[None, :, None, None]
    return x[ni, ci, rows[:, None, :, None], cols[:, None, None, :]]


def channel_stats(train_x: np.ndarray) -> tuple[list[float], list[float]]:
    """Per-channel mean and std (in [0, 1] units) measured from the training images
    (N x H x W x C uint8), so no published constant is needed and synthetic data
    is normalised by its own statistics."""
    x = train_x.reshape(-1, train_x.shape[-1])
    # float64 sums over a strided sample keep this to well under a second for 50k images
    sample = x[:: max(1, x.shape[0] // 2_000_000)].astype(np.float64) / 255.0
    return sample.mean(axis=0).tolist(), sample.std(axis=0).tolist()


@dataclass
class DeviceData:
    """The data set on the device: uint8 NCHW images and int64 labels."""

    train_x: torch.Tensor
    train_y: torch.Tensor
    test_x: torch.Tensor
    test_y: torch.Tensor
    mean: torch.Tensor  # (1, C, 1, 1) float32
    std: torch.Tensor

    @classmethod
    def upload(cls, train_x: np.ndarray, train_y: np.ndarray, test_x: np.ndarray, test_y: np.ndarray, device: str) -> "DeviceData":
        mean, std = channel_stats(train_x)

        def imgs(a: np.ndarray) -> torch.Tensor:
            return torch.from_numpy(np.ascontiguousarray(a)).to(device).permute(0, 3, 1, 2).contiguous()

        def labels(a: np.ndarray) -> torch.Tensor:
            return torch.from_numpy(np.asarray(a, dtype=np.int64)).to(device)

        return cls(
            imgs(train_x), labels(train_y), imgs(test_x), labels(test_y),
            torch.tensor(mean, device=device).view(1, -1, 1, 1),
            torch.tensor(std, device=device).view(1, -1, 1, 1),
        )

    def to_input(self, x_u8: torch.Tensor, image_size: int) -> torch.Tensor:
        """uint8 NCHW -> normalised float32, upsampled to ``image_size``, channels_last on CUDA."""
        x = x_u8.float().div_(255.0).sub_(self.mean).div_(self.std)
        if image_size != x.shape[-1]:
            x = F.interpolate(x, size=(image_size, image_size), mode="bilinear", align_corners=False)
        return x.contiguous(memory_format=torch.channels_last if x.is_cuda else torch.contiguous_format)
