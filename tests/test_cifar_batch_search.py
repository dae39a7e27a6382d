"""The max-batch search: exact answers, OOM never fatal, memory freed between tries."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from kit.bench.cifar.batch_search import Try, find_max_batch, is_oom  # noqa: E402


def _fake_gpu(capacity: int, error=torch.cuda.OutOfMemoryError):
    tried: list[int] = []

    def try_batch(n: int) -> None:
        tried.append(n)
        if n > capacity:
            raise error(f"CUDA out of memory. Tried to allocate {n} MiB")

    return try_batch, tried


@pytest.mark.parametrize("capacity", [1, 63, 64, 100, 777, 4096, 5000])
def test_search_returns_exactly_the_largest_batch_that_fits(capacity):
    try_batch, _ = _fake_gpu(capacity)
    assert find_max_batch(try_batch, start=64, limit=65536, free=lambda: None) == capacity


def test_out_of_memory_is_never_fatal_and_memory_is_freed_after_every_try():
    try_batch, tried = _fake_gpu(300)
    frees: list[int] = []
    log: list[Try] = []
    result = find_max_batch(try_batch, start=64, free=lambda: frees.append(len(tried)), log=log)
    assert result == 300
    assert frees == list(range(1, len(tried) + 1))  # one free after each try, in order
    assert [t.batch_size for t in log] == tried
    assert [t.batch_size for t in log if not t.fits] and all(t.batch_size > 300 for t in log if not t.fits)
    assert tried[:4] == [64, 128, 256, 512]  # doubling until the first failure


def test_runtime_error_saying_out_of_memory_counts_as_oom():
    try_batch, _ = _fake_gpu(90, error=RuntimeError)
    assert find_max_batch(try_batch, start=64, free=lambda: None) == 90
    assert is_oom(RuntimeError("CUBLAS_STATUS_ALLOC_FAILED when calling cublasCreate"))
    assert not is_oom(RuntimeError("shape mismatch"))


def test_errors_other_than_oom_propagate():
    def broken(n: int) -> None:
        raise ValueError("a bug, not a memory limit")

    with pytest.raises(ValueError):
        find_max_batch(broken, free=lambda: None)


def test_limit_caps_the_search_and_nothing_fitting_returns_zero():
    try_batch, _ = _fake_gpu(10**9)
    assert find_max_batch(try_batch, start=64, limit=1000, free=lambda: None) == 1000
    try_batch, _ = _fake_gpu(0)
    assert find_max_batch(try_batch, start=64, free=lambda: None) == 0


def test_coarse_resolution_stops_within_the_bracket():
    try_batch, tried = _fake_gpu(1000)
    result = find_max_batch(try_batch, start=64, resolution=8, free=lambda: None)
    assert 992 < result <= 1000
    assert len(tried) < 12


def test_a_stop_request_ends_the_search_before_its_next_try():
    """The run's stop record (a Ctrl-C whose KeyboardInterrupt was lost in a weakref callback)
    ends the search at its next try, not after the rest of the bracket."""
    try_batch, tried = _fake_gpu(5000)
    with pytest.raises(KeyboardInterrupt):
        find_max_batch(try_batch, start=64, free=lambda: None, should_stop=lambda: len(tried) >= 3)
    assert tried == [64, 128, 256]
