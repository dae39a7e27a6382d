"""Bytes per element of the number formats the precision modes store tensors in.

Sources: IEEE 754-2008 (binary32: 4 bytes, binary16: 2 bytes); Google's bfloat16 (the top 16 bits
of a binary32: 2 bytes; "BFloat16: The secret to high performance on Cloud TPUs", 2019); NVIDIA's
TF32 is a tensor-core *math mode* whose operands stay stored as binary32 ("TensorFloat-32 in the
A100 GPU", NVIDIA blog, 2020; PyTorch's ``torch.backends.cuda.matmul.allow_tf32``: 4 bytes in
memory); OCP 8-bit floating point specification (E4M3 and E5M2, 2023: 1 byte).

Keyed by kit.bench.calibrate's dtype names (a precision mode's ``peak_dtype``, kit.results.precisions).
"""

from __future__ import annotations

from typing import Dict

BYTES_PER_ELEMENT: Dict[str, int] = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1}

#: an autocast dtype (kit.results.precisions' ``autocast``, torch's name) -> its calibrate name
AUTOCAST_DTYPE: Dict[str, str] = {"float16": "fp16", "bfloat16": "bf16"}
