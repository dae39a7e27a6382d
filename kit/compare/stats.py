"""Ratios between two sets of repeats, with a 95% CI and a significance verdict.

Pure Python (no scipy, no numpy): the host side installs in seconds.

Method (stated in every compare output as :data:`METHOD`):

- The point estimate is a ratio of **medians** over repeats,
  ``median(num) / median(den)`` (:func:`kit.results.ratios.ratio_of_medians`,
  the one definition every view uses): a single slow repeat does not move it.
- The 95% confidence interval is that of the ratio of **means**,
  ``mean(num) / mean(den)``, from **Fieller's theorem** for two
  independent samples: the set of R for which ``mean(num) - R*mean(den)`` is
  not significantly different from 0, with the Welch-Satterthwaite degrees of
  freedom. When the denominator itself is not clearly away from zero the
  interval is unbounded, and is reported as such.
- The verdict is **Welch's two-sample t-test** (two-sided, p < 0.05) on the
  raw samples. At R = 1 Fieller's statistic *is* Welch's t, so "significant"
  and "the CI excludes 1" agree (up to the degrees of freedom used).
- With fewer than two repeats on either side there is no spread to test
  against: the ratio is shown and the verdict is "n/a (1 repeat)".
- Medians and means differ when the repeats are skewed (typically one slow
  first repeat). Where the ratio of medians falls outside the interval of the
  ratio of means, :attr:`RatioEstimate.outside_ci` is true and every view marks
  the number with :data:`OUTSIDE_MARK` and says why (:data:`OUTSIDE_NOTE`).

The Student-t distribution comes from the regularised incomplete beta
function (continued fraction, as in Numerical Recipes section 6.4).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass
from typing import Iterable

from kit.results.ratios import ratio_of_medians

ALPHA = 0.05
METHOD = (
    "point estimate: ratio of medians over repeats; 95% CI: of the ratio of means, by Fieller's theorem with "
    "Welch-Satterthwaite degrees of freedom; significance: Welch's two-sample t-test on the means (two-sided, p < 0.05)"
)
OUTSIDE_MARK = "†"
OUTSIDE_NOTE = (
    "† the ratio of medians lies outside the 95% CI of the ratio of means: the repeats are skewed "
    "(often one slow repeat), so the mean and its interval are pulled away from the median; trust the median"
)

SIGNIFICANT = "significant"
NOT_SIGNIFICANT = "not significant"
ONE_REPEAT = "n/a (1 repeat)"


# --- Student t -----------------------------------------------------------------

def _betacf(a: float, b: float, x: float) -> float:
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_bt = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    bt = math.exp(log_bt)
    if x < (a + 1.0) / (a + b + 2.0):
        return bt * _betacf(a, b, x) / a
    return 1.0 - bt * _betacf(b, a, 1.0 - x) / b


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with ``df`` degrees of freedom."""
    if math.isinf(t):
        return 0.0
    if df <= 0 or math.isnan(t):
        return float("nan")
    return betainc(df / 2.0, 0.5, df / (df + t * t))


def t_cdf(t: float, df: float) -> float:
    half = 0.5 * t_two_sided_p(t, df)
    return 1.0 - half if t >= 0 else half


def t_pdf(t: float, df: float) -> float:
    log_c = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    return math.exp(log_c - (df + 1) / 2 * math.log1p(t * t / df))


def t_quantile(q: float, df: float) -> float:
    """Inverse CDF of Student's t (q in (0, 1)).

    Newton's method from the normal quantile. For q > 0.5 the CDF is concave
    on t > 0, so every step from below stays below the root and the iterates
    rise monotonically to it (no overshoot, no bracketing needed)."""
    if not 0.0 < q < 1.0:
        raise ValueError("quantile must be in (0, 1)")
    if q == 0.5:
        return 0.0
    if q < 0.5:
        return -t_quantile(1.0 - q, df)
    x = statistics.NormalDist().inv_cdf(q)  # below the t quantile for every df
    for _ in range(200):
        step = (t_cdf(x, df) - q) / t_pdf(x, df)
        x -= step
        if abs(step) < 1e-12 * max(1.0, abs(x)):
            break
    return x


# --- samples and ratios -------------------------------------------------------------

@dataclass(frozen=True)
class Sample:
    """What the tests and charts need from a set of repeats."""

    n: int
    mean: float
    sd: float
    median: float
    min: float
    max: float

    @classmethod
    def of(cls, values: Iterable[float | None]) -> "Sample | None":
        xs = [float(v) for v in values if v is not None and isinstance(v, (int, float)) and math.isfinite(v)]
        if not xs:
            return None
        mean = math.fsum(xs) / len(xs)
        # plain float arithmetic: statistics.stdev is exact (Fractions) and 50x slower
        sd = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else 0.0
        return cls(len(xs), mean, sd, statistics.median(xs), min(xs), max(xs))

    @classmethod
    def from_stats(cls, d: dict | None) -> "Sample | None":
        """From a results ``summary`` entry (n, mean, stdev, median) when the
        per-repeat values are not available."""
        if not isinstance(d, dict):
            return None
        try:
            n, mean = int(d["n"]), float(d["mean"])
        except (KeyError, TypeError, ValueError):
            return None
        sd = d.get("stdev")
        median = d.get("median", mean)
        if n < 1 or not math.isfinite(mean):
            return None
        sd = float(sd) if isinstance(sd, (int, float)) else 0.0
        lo, hi = d.get("min", median), d.get("max", median)
        return cls(n, mean, sd, float(median), float(lo), float(hi))

    @property
    def cv(self) -> float:
        return self.sd / self.mean if self.mean else 0.0


@dataclass(frozen=True)
class RatioEstimate:
    ratio: float  # the point estimate: ratio of medians
    ci_low: float | None  # 95% CI of the ratio of means; None: unbounded or not computable
    ci_high: float | None
    p_value: float | None  # Welch's t-test on the means
    df: float | None
    verdict: str  # SIGNIFICANT / NOT_SIGNIFICANT / ONE_REPEAT
    mean_ratio: float | None = None  # the ratio of means (what the CI is an interval of)

    @property
    def significant(self) -> bool:
        return self.verdict == SIGNIFICANT

    @property
    def outside_ci(self) -> bool:
        """The ratio of medians lies outside the (bounded) CI of the ratio of means."""
        if self.ci_low is None or self.ci_high is None:
            return False
        return not (self.ci_low <= self.ratio <= self.ci_high)

    def ci_text(self, decimals: int = 3) -> str:
        if self.verdict == ONE_REPEAT:
            return "n/a"
        if self.ci_low is None or self.ci_high is None:
            return "unbounded"
        return f"[{self.ci_low:.{decimals}f}, {self.ci_high:.{decimals}f}]"

    def to_dict(self) -> dict:
        d = asdict(self)
        d["point_estimate"] = "ratio of medians"
        d["ci_of"] = "ratio of means (Fieller, 95%)"
        d["median_outside_ci"] = self.outside_ci
        return d


def welch_t_test(a: Sample, b: Sample) -> tuple[float, float, float]:
    """(t, df, two-sided p) for mean(a) - mean(b); both samples need n >= 2."""
    va, vb = a.sd**2 / a.n, b.sd**2 / b.n
    se2 = va + vb
    diff = a.mean - b.mean
    if se2 == 0.0:
        # No spread at all (identical repeats): equal means are not different;
        # different means are as different as it gets.
        return (0.0 if diff == 0 else math.copysign(math.inf, diff)), float(a.n + b.n - 2), (1.0 if diff == 0 else 0.0)
    df = se2**2 / ((va**2 / (a.n - 1) if va else 0.0) + (vb**2 / (b.n - 1) if vb else 0.0))
    t = diff / math.sqrt(se2)
    return t, df, t_two_sided_p(t, df)


def fieller_interval(num: Sample, den: Sample, level: float = 0.95) -> tuple[float | None, float | None, float]:
    """CI of mean(num)/mean(den) by Fieller's theorem; returns (low, high, df)."""
    a, b = num.mean, den.mean
    va, vb = num.sd**2 / num.n, den.sd**2 / den.n
    r = a / b
    if va == 0.0 and vb == 0.0:
        return r, r, float(num.n + den.n - 2)
    denom = (va**2 / (num.n - 1) if va else 0.0) + (r**4 * vb**2 / (den.n - 1) if vb else 0.0)
    df = (va + r * r * vb) ** 2 / denom
    t = t_quantile(0.5 + level / 2.0, df)
    qa = b * b - t * t * vb
    if qa <= 0.0:
        return None, None, df  # the denominator is not clearly away from 0
    disc = t * t * (va * qa + vb * a * a)
    root = math.sqrt(max(disc, 0.0))
    low, high = (a * b - root) / qa, (a * b + root) / qa
    return min(low, high), max(low, high), df


def ratio_estimate(num: Sample, den: Sample, point: float | None = None) -> RatioEstimate | None:
    """The ratio of medians (or ``point``, computed by the caller with the same
    definition from the cells) with the CI of the ratio of means and Welch's
    verdict; None when a denominator is 0."""
    if den.mean == 0:
        return None
    ratio = point if point is not None else ratio_of_medians([num.median], [den.median])
    if ratio is None:
        return None
    mean_ratio = num.mean / den.mean
    if num.n < 2 or den.n < 2:
        return RatioEstimate(ratio, None, None, None, None, ONE_REPEAT, mean_ratio)
    _t, _df, p = welch_t_test(num, den)
    low, high, df = fieller_interval(num, den)
    verdict = SIGNIFICANT if p < ALPHA else NOT_SIGNIFICANT
    return RatioEstimate(ratio, low, high, p, df, verdict, mean_ratio)
