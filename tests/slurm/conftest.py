"""The real-Slurm tests run only where scripts/ci_slurm.sh started a one-node cluster (KIT_SLURM_TESTS=1)."""

import os

import pytest


@pytest.fixture(autouse=True)
def _needs_slurm():
    if os.environ.get("KIT_SLURM_TESTS") != "1":
        pytest.skip("real-Slurm tests run in .ci/run's Slurm job (scripts/ci_slurm.sh sets KIT_SLURM_TESTS=1)")
