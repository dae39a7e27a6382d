"""The vectorised on-device augmentation (and its per-image twin in the fastai engine)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from kit.bench.cifar.gpu_data import PAD, DeviceData, augment, channel_stats, crop_flip_indices  # noqa: E402


def _coordinate_images(n: int, h: int = 32, w: int = 32) -> torch.Tensor:
    """Images whose pixels encode their own (row, col): channel 0 = row, 1 = col, 2 = image id."""
    rows = torch.arange(h).view(1, h, 1).expand(n, h, w)
    cols = torch.arange(w).view(1, 1, w).expand(n, h, w)
    ids = torch.arange(n).view(n, 1, 1).expand(n, h, w)
    return torch.stack([rows, cols, ids], dim=1).to(torch.uint8)


def _reference(img_hwc: np.ndarray, dy: int, dx: int, flip: bool) -> np.ndarray:
    padded = np.pad(img_hwc, ((PAD, PAD), (PAD, PAD), (0, 0)), mode="reflect")
    crop = padded[dy : dy + img_hwc.shape[0], dx : dx + img_hwc.shape[1]]
    return crop[:, ::-1] if flip else crop


def test_augment_keeps_shape_dtype_and_device():
    x = _coordinate_images(16)
    out = augment(x, torch.Generator().manual_seed(0))
    assert out.shape == x.shape and out.dtype == torch.uint8 and out.device == x.device


def test_every_augmented_image_is_a_reflect_padded_crop_of_its_own_source_maybe_flipped():
    x = _coordinate_images(128)
    out = augment(x, torch.Generator().manual_seed(3))
    src = x[0].permute(1, 2, 0).numpy()[..., :2]  # (row, col) planes are the same for every image
    candidates = {(dy, dx, f): _reference(src, dy, dx, f)
                  for dy in range(2 * PAD + 1) for dx in range(2 * PAD + 1) for f in (False, True)}
    seen_offsets, flips = set(), 0
    for n in range(x.shape[0]):
        got = out[n].permute(1, 2, 0).numpy()
        assert (got[..., 2] == n).all()  # never mixes images of the batch
        matches = [k for k, ref in candidates.items() if np.array_equal(got[..., :2], ref)]
        assert matches, f"image {n} is not a crop within the padding"
        dy, dx, f = matches[0]
        seen_offsets.add((dy, dx))
        flips += f
    assert len(seen_offsets) > 30  # offsets spread over the 9 x 9 possibilities
    assert 34 < flips < 94  # about half flipped


def test_index_rule_matches_numpy_reflect_padding_for_given_offsets():
    img = np.random.default_rng(0).integers(0, 256, (32, 32, 3), dtype=np.uint8)
    for dy, dx, flip in [(0, 0, False), (8, 8, True), (0, 8, True), (4, 4, False), (7, 1, True)]:
        rows, cols = crop_flip_indices(torch.tensor([dy]), torch.tensor([dx]), torch.tensor([flip]), 32, 32)
        got = img[rows[0].numpy()][:, cols[0].numpy()]
        assert np.array_equal(got, _reference(img, dy, dx, flip))


def test_fastai_item_transform_applies_the_same_rule():
    pytest.importorskip("fastai")
    from fastai.torch_core import TensorImage

    from kit.bench.cifar.fastai_engine import _make_transforms

    PadCropFlip, _ = _make_transforms()
    tfm = PadCropFlip()
    img = torch.from_numpy(np.random.default_rng(1).integers(0, 256, (3, 32, 32), dtype=np.uint8))
    for _ in range(5):
        tfm.before_call(None, split_idx=0)
        got = tfm.encodes(TensorImage(img)).permute(1, 2, 0).numpy()
        assert np.array_equal(got, _reference(img.permute(1, 2, 0).numpy(), tfm.dy, tfm.dx, tfm.flip))


def test_normalised_input_is_float_and_upsampled_on_request():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (20, 32, 32, 3), dtype=np.uint8)
    y = rng.integers(0, 100, 20)
    data = DeviceData.upload(x, y, x[:4], y[:4], "cpu")
    inp = data.to_input(data.train_x[:4], 32)
    assert inp.dtype == torch.float32 and inp.is_contiguous()  # channels_last only on CUDA
    assert abs(float(data.to_input(data.train_x, 32).mean())) < 0.05  # normalised by its own statistics
    assert data.to_input(data.train_x[:2], 64).shape == (2, 3, 64, 64)


def test_channel_stats_are_measured_from_the_images():
    x = np.zeros((10, 4, 4, 3), dtype=np.uint8)
    x[..., 0] = 255
    mean, std = channel_stats(x)
    assert mean == pytest.approx([1.0, 0.0, 0.0]) and std == pytest.approx([0.0, 0.0, 0.0])
