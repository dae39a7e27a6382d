"""Every number the kit takes from outside, as data, each with its source.

- ``datasets``: download mirrors, checksums, published sizes.
- ``cuda``: driver minimums per CUDA toolkit, architectures per toolkit/torch build.
- ``models``: published model FLOPs, the word-language-model presets.
- ``hardware``: vendor peak rates used only as context (the kit measures its own).
- ``estimates``: the rates behind the plan's rough time estimate (measured by the kit).
- ``stacks``: what each image stack pins, what it needs from the host, measured builds.
- ``torch_pairs``: which torchvision goes with which torch.
- ``dtypes``: bytes per element of each number format (the memory-bound ceiling of a precision).

Nothing else in the kit hard-codes such a number.
"""
