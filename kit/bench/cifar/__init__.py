"""The CIFAR-100 ResNet suite: two engines over the same data and architectures.

- ``torch_engine``: GPU-bound PyTorch (data set resident on the device, augmentation
  on the device, channels_last, torch.compile / CUDA graphs).
- ``fastai_engine``: what a fastai user runs (DataLoaders with CPU workers,
  ``Learner.fit_one_cycle``, ``to_fp16()`` / ``to_bf16()`` / ``to_non_native_fp16()``).
- ``suite.run_cell``: the runner's entry; picks the engine, repeats, summarises.
"""
