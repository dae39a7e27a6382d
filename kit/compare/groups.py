"""The groups a fleet is split into (``--group-by``): by GPU model, driver version, image stack or
host name. One definition for the comparison, which judges methods within each group
(:func:`kit.compare.engine.build_comparison`), and for the fleet's views (:mod:`kit.compare.fleet.grouped`)."""

from __future__ import annotations

from kit.bundle.inert import inert
from kit.compare.fmt import fmt_machine
from kit.compare.load import Source
from kit.env.record import host_id_of
from kit.errors import UsageError

GROUP_BY = ("gpu", "driver", "stack", "host")
#: the EnvSummary field each grouping reads
_ATTR = {"gpu": "gpu", "driver": "driver", "stack": "stack", "host": "machine"}


def check_group_by(by: str) -> str:
    """``by`` when it is one of :data:`GROUP_BY`, else the one-line usage error."""
    if by not in GROUP_BY:
        raise UsageError(f"--group-by {by!r}: choose one of {', '.join(GROUP_BY)}.")
    return by


def group_of(src: Source, by: str) -> str:
    """The group a machine belongs to (its GPU model, driver, stack or host). A host is its name with
    the host id its run recorded (kit.compare.fmt.fmt_machine): clouds call every machine ``vm``, and
    two machines of one name are two groups, never one."""
    if by == "host":
        hid = host_id_of(src.environment) if isinstance(src.environment, dict) else None
        return fmt_machine(src.env.machine, inert(hid) if isinstance(hid, str) and hid.strip() else None)
    return getattr(src.env, _ATTR[by])
