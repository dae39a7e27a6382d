"""fp16-master's loss scaling against Apex's own DynamicLossScaler (apex/fp16_utils/loss_scaler.py
of commit 241dd6c4, the Apex the 2019 article's example used), loaded from that commit's source
(tests/fixtures/originals.py says where it is looked for). The same checks run inside the cuda10 image against its installed
Apex (tests/containers/apex_cpu_checks.py, by the container job)."""

from __future__ import annotations

import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "containers"))
import apex_cpu_checks  # noqa: E402
from fixtures.modules import load_file  # noqa: E402
from fixtures.originals import apex_archive, missing_apex  # noqa: E402

SNAPSHOT = apex_archive("241dd6c4")
pytestmark = pytest.mark.skipif(not SNAPSHOT.is_file(), reason=missing_apex("241dd6c4"))


@pytest.fixture(scope="module")
def apex_dynamic_loss_scaler(tmp_path_factory):
    folder = tmp_path_factory.mktemp("apex-2018")
    with tarfile.open(SNAPSHOT) as tar:
        member = tar.getmember("apex-241dd6c4/apex/fp16_utils/loss_scaler.py")
        (folder / "loss_scaler.py").write_bytes(tar.extractfile(member).read())
    return load_file(folder / "loss_scaler.py", "apex_2018_loss_scaler").DynamicLossScaler


def test_the_dynamic_scale_follows_apex_step_for_step(apex_dynamic_loss_scaler):
    line = apex_cpu_checks.scale_trajectory_matches(apex_dynamic_loss_scaler)
    assert "both" in line


def test_a_kit_scaler_that_grew_after_999_steps_would_be_caught(apex_dynamic_loss_scaler):
    """The oracle can fail: a growth interval one step short disagrees with Apex."""
    from kit.bench.precision import DYNAMIC_GROWTH_INTERVAL, LossScaler

    ours, theirs = LossScaler(growth_interval=DYNAMIC_GROWTH_INTERVAL - 1), apex_dynamic_loss_scaler()
    diverged = False
    for _ in range(3000):
        ours.update(False)
        theirs.update_scale(False)
        diverged |= ours.scale != theirs.loss_scale
    assert diverged


def test_the_overflow_flag_and_the_master_grads_agree_with_apex(apex_dynamic_loss_scaler):
    line = apex_cpu_checks.overflow_check_matches(apex_dynamic_loss_scaler)
    assert "[False, True, True, False]" in line


def test_a_static_scale_never_moves():
    assert apex_cpu_checks.static_scale_is_never_checked() == "static 512 stays 512"
