"""The image stacks a command takes with ``--stack`` (`kit doctor`, `kit image build`, `kit launch`):
``auto`` (the one this host runs best, as `kit doctor` judges) and each stack the kit has
(kit.facts.stacks.STACK_NAMES)."""

from __future__ import annotations

from enum import Enum

from kit.facts.stacks import STACK_NAMES

#: ``StackChoice.cuda12_fused.value == "cuda12-fused"``; ``auto`` first, then the stacks in the kit's order
StackChoice = Enum("StackChoice", {name.replace("-", "_"): name for name in ("auto", *STACK_NAMES)}, type=str)
