"""What `kit doctor` reports: a verdict per stack, host-level problems, the whole report.

The checks that fill them are kit.env.doctor; the human view is kit.env.doctor_view.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from kit import __version__
from kit.env.probe import known
from kit.errors import EnvironmentCheckError

Status = str  # "ok" | "limited" | "cannot" (no typing.Literal on the cuda10 image's Python 3.7)

_STATUS_RANK = {"ok": 0, "limited": 1, "cannot": 2}


@dataclass
class Verdict:
    stack: str
    status: Status
    reasons: list[str] = field(default_factory=list)
    remedies: list[str] = field(default_factory=list)

    @property
    def runnable(self) -> bool:
        return self.status != "cannot"

    def _worsen(self, status: Status, reason: str, remedy: str | None = None) -> None:
        if _STATUS_RANK[status] > _STATUS_RANK[self.status]:
            self.status = status
        self.reasons.append(reason)
        if remedy and remedy not in self.remedies:
            self.remedies.append(remedy)

    def to_dict(self) -> dict:
        return asdict(self) | {"runnable": self.runnable}


@dataclass
class Problem:
    """A host-level finding shown under the tables (driver missing, Docker down...)."""

    severity: str  # "error" | "warning" | "info"
    message: str
    remedy: str | None = None


@dataclass
class Report:
    requested: str
    gpu: int | None
    host: dict
    docker: dict
    verdicts: dict[str, Verdict]
    recommended: str
    problems: list[Problem] = field(default_factory=list)
    #: `kit run`'s stack in this Python (kit.env.doctor._bench_section); None: not checked
    bench: dict | None = None

    @property
    def selected(self) -> str:
        """The stack the exit status is about: the requested one, or the recommendation."""
        return self.recommended if self.requested == "auto" else self.requested

    @property
    def ok(self) -> bool:
        return self.verdicts[self.selected].runnable

    def to_dict(self) -> dict:
        return {
            "kit_version": __version__,
            "requested_stack": self.requested,
            "recommended_stack": self.recommended,
            "selected_stack": self.selected,
            "ok": self.error() is None,  # the exit status is 0
            "gpu": self.gpu,
            "verdicts": {name: v.to_dict() for name, v in self.verdicts.items()},
            "problems": [asdict(p) for p in self.problems],
            "nvml": self.host,
            "docker": self.docker,
        } | ({} if self.bench is None else {"bench_stack": self.bench})

    def error(self) -> EnvironmentCheckError | None:
        """The error `kit doctor` exits with, or None when the selected stack can run and the
        native benchmark stack (where checked) is not broken."""
        if self.ok:
            broken = [f for f in (self.bench or {}).get("findings", []) if f["severity"] == "error"]
            if broken:
                return EnvironmentCheckError(f"The benchmark stack of kit run in this Python is broken: {broken[0]['message']}.",
                                             remedy=broken[0]["remedy"])
            return None
        v = self.verdicts[self.selected]
        msg = f"The {self.selected} stack cannot run on this host: " + "; ".join(v.reasons)
        if self.requested != "auto" and self.recommended != self.selected:
            msg += f". The {self.recommended} stack can (kit doctor --stack {self.recommended})."
        return EnvironmentCheckError(msg, remedy=" ".join(v.remedies) or None)

    def raise_if_not_ok(self) -> None:
        err = self.error()
        if err is not None:
            raise err


# -- wording shared by the checks and the view ------------------------------------


def gib(n: int) -> str:
    return f"{n / 1024**3:.1f} GiB"


def gpu_label(gpu: dict) -> str:
    name = known(gpu.get("name"), "unknown GPU")
    sm = known(gpu.get("sm"), "sm unknown")
    arch = known(gpu.get("architecture"), None)
    return f"GPU {gpu.get('index')} ({name}, {sm}" + (f", {arch})" if arch else ")")
