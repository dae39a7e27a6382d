"""How a ratio estimate and a CV are printed, the same in every view.

Kept apart from :mod:`kit.compare.render` (which needs the comparison engine)
so the run report, which also runs on Python 3.7 in the cuda10 image, can
import it on its own.
"""

from __future__ import annotations

from kit.compare.stats import ONE_REPEAT, OUTSIDE_MARK, RatioEstimate, Sample
from kit.results.ratios import EPOCH_S, RATIO_DECIMALS, THROUGHPUT, fmt_ratio

#: decimals of a machine-against-baseline ratio (differences of a few tenths of a percent matter there)
VS_BASELINE_DECIMALS = 3
#: what each measure's coefficient of variation is called wherever it is shown
CV_NAMES = {EPOCH_S: "epoch-time CV", THROUGHPUT: "throughput CV"}


def fmt_estimate(est: RatioEstimate | None, decimals: int = VS_BASELINE_DECIMALS, divisor: str = "the divisor's") -> str:
    """``1.015× [1.011, 1.018]``: the point estimate (ratio of medians), then the
    95% CI of the ratio of means, in the same decimals; ``†`` when the point
    lies outside that interval (see :data:`kit.compare.stats.OUTSIDE_NOTE`); an
    interval without bounds says why, naming the ``divisor``."""
    if est is None:
        return "—"
    point = fmt_ratio(est.ratio, decimals) + (OUTSIDE_MARK if est.outside_ci else "")
    if est.verdict == ONE_REPEAT:
        return point
    return f"{point} {est.ci_text(decimals, divisor)}"


def fmt_speedup_estimate(est: RatioEstimate | None) -> str:
    """The speedup over fp32 with its interval, as every view prints it."""
    return fmt_estimate(est, RATIO_DECIMALS, "fp32's")


def fmt_vs_baseline(est: RatioEstimate | None) -> str:
    """A machine's throughput ÷ the baseline machine's, with its interval."""
    return fmt_estimate(est, VS_BASELINE_DECIMALS, "the baseline's")


def fmt_cv(s: Sample | None, metric: str) -> str:
    """``throughput CV 0.2%``: a CV always says whose it is."""
    if s is None or s.n < 2:
        return ""
    return f"{CV_NAMES[metric]} {s.cv:.1%}"


_UNIT_SHORT = {"images": "img/s", "tokens": "tok/s"}


def fmt_time(s: Sample | None) -> str:
    if s is None:
        return "—"
    v = s.median
    return f"{v:.3f} s" if v < 1 else f"{v:.2f} s" if v < 10 else f"{v:.1f} s" if v < 1000 else f"{v:,.0f} s"


def fmt_throughput(s: Sample | None, unit: str) -> str:
    if s is None:
        return "—"
    return f"{s.median:,.0f} {_UNIT_SHORT.get(unit, unit + '/s')}" if s.median >= 100 else f"{s.median:.3g} {_UNIT_SHORT.get(unit, unit + '/s')}"


def speed_verdict(est: RatioEstimate | None) -> str:
    """"faster" / "slower" when significant, else the stats verdict."""
    if est is None:
        return ""
    if est.significant:
        return "faster" if est.ratio > 1 else "slower"
    return est.verdict


def fmt_machine(name: str, host_id: str | None) -> str:
    """A machine as every view names it: its host name with the host id its runs recorded beside it,
    ``vm (host id h-eb84660102b93f88)`` (clouds call every machine ``vm``; the id is what a history
    follows); the name alone where no id was recorded or the name is the id (an anonymised host)."""
    return name if not host_id or host_id == name else f"{name} (host id {host_id})"
