"""How busy the host was around a cell: load average and CPU steal, for every run.

A run on a host that other jobs load (or whose hypervisor lends its CPUs elsewhere) is slower
for reasons that are not the machine's: its numbers look like a slow machine or a slow image
stack. So the runner records, around each cell::

    probe = hostload.start()        # os.getloadavg(), /proc/stat's CPU times
    ... run the cell ...
    result.host = probe.stop()      # {"cores", "load_1m_start", "load_1m_end", "steal_pct", "busy", ...}

``busy`` is the reason in words when a threshold below was passed (else None), and
``kit compare`` warns about such cells (kit.compare.engine). Linux only for steal (the
``steal`` column of /proc/stat's ``cpu`` line); elsewhere it is None, and the load average
is None where the OS has none. Never imports torch; cheap (two small reads per cell).
"""

from __future__ import annotations

import os
import time
from typing import Any, Optional, Tuple

#: Busy when the 1-minute load average passes this many runnable threads per core. A CPU cell
#: keeps every core busy by itself (load about the core count) and a GPU cell about one: at 1.5x
#: the cores, other processes are competing for them, and a cell's wall time includes waiting.
BUSY_LOAD_PER_CORE = 1.5
#: Busy when the hypervisor took more than this share of the vCPUs' time (steal, %) during the
#: cell: a few percent of steal is common on shared cloud hosts, more means another guest ran
#: on this VM's CPUs while it measured.
BUSY_STEAL_PCT = 5.0

PROC_STAT = "/proc/stat"


def cpu_times(text: Optional[str] = None) -> Optional[Tuple[int, int]]:
    """(all jiffies, steal jiffies) from /proc/stat's aggregate ``cpu`` line (``text``: its
    content, for tests), or None where there is none (not Linux) or it has no steal column."""
    if text is None:
        try:
            with open(PROC_STAT, encoding="ascii") as fh:
                text = fh.readline()
        except OSError:
            return None
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu" and len(parts) >= 9:
            try:
                values = [int(x) for x in parts[1:9]]  # user nice system idle iowait irq softirq steal
            except ValueError:
                return None
            return sum(values), values[7]
    return None


def load_1m() -> Optional[float]:
    try:
        return round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):
        return None


def steal_pct(before: Optional[Tuple[int, int]], after: Optional[Tuple[int, int]]) -> Optional[float]:
    """The share of CPU time stolen between two cpu_times() readings, in %, or None."""
    if before is None or after is None or after[0] <= before[0]:
        return None
    return round(100.0 * (after[1] - before[1]) / (after[0] - before[0]), 2)


def busy_reason(record: Any) -> Optional[str]:
    """Why a cell's host record says the host was busy ("load average 6.4 on 2 cores",
    "CPU steal 12%"), or None: the thresholds above, applied to a record from any bundle."""
    if not isinstance(record, dict):
        return None
    reasons = []
    cores = record.get("cores")
    loads = [x for x in (record.get("load_1m_start"), record.get("load_1m_end"))
             if isinstance(x, (int, float)) and not isinstance(x, bool)]
    if isinstance(cores, int) and cores > 0 and loads and max(loads) > BUSY_LOAD_PER_CORE * cores:
        reasons.append(f"load average {max(loads):g} on {cores} core{'s' if cores > 1 else ''}")
    steal = record.get("steal_pct")
    if isinstance(steal, (int, float)) and not isinstance(steal, bool) and steal > BUSY_STEAL_PCT:
        reasons.append(f"CPU steal {steal:g}%")
    return ", ".join(reasons) or None


class Probe:
    def __init__(self) -> None:
        self.started = time.monotonic()
        self.load_start = load_1m()
        self.times_start = cpu_times()

    def stop(self) -> dict:
        record = {
            "cores": os.cpu_count(),
            "load_1m_start": self.load_start,
            "load_1m_end": load_1m(),
            "steal_pct": steal_pct(self.times_start, cpu_times()),
            "seconds": round(time.monotonic() - self.started, 3),
            "source": "os.getloadavg() (1-minute load average) at the cell's start and end; CPU steal from /proc/stat over the cell",
        }
        record["busy"] = busy_reason(record)
        return record


def start() -> Probe:
    return Probe()


def snapshot() -> dict:
    """The host's load now, for env.json at a run's start."""
    return {"cores": os.cpu_count(), "load_1m": load_1m(), "source": "os.getloadavg() at the run's start"}
