"""Ratios between two sets of repeats, with a 95% CI and a significance verdict.

scipy.stats gives the t distribution (imported when first needed, so loading
the kit stays fast); the host side still installs in seconds and without torch.

Method (stated in every compare output as :data:`METHOD`):

- The point estimate is a ratio of **medians** over repeats,
  ``median(num) / median(den)`` (:func:`kit.results.ratios.ratio_of_medians`,
  the one definition every view uses): a single slow repeat does not move it.
- The 95% confidence interval is that of the ratio of **means**,
  ``mean(num) / mean(den)``, from **Fieller's theorem** for two
  independent samples: the set of R for which ``mean(num) - R*mean(den)`` is
  not significantly different from 0, with the Welch-Satterthwaite degrees of
  freedom. When the denominator itself is not clearly away from zero (its
  repeats vary too much) the interval is unbounded, and every view says so in
  words (:data:`UNBOUNDED`).
- The verdict is **Welch's two-sample t-test** (two-sided, p < 0.05) on the
  raw samples. At R = 1 Fieller's statistic *is* Welch's t, so "significant"
  and "the CI excludes 1" agree (up to the degrees of freedom used).
- With fewer than two repeats on either side there is no spread to test
  against: the ratio is shown and the verdict is "n/a (1 repeat)".
- Medians and means differ when the repeats are skewed (typically one slow
  first repeat). Where the ratio of medians falls outside the interval of the
  ratio of means, :attr:`RatioEstimate.outside_ci` is true and every view marks
  the number with :data:`OUTSIDE_MARK` and says why (:data:`OUTSIDE_NOTE`).

The Student-t distribution (quantiles, p-values) is ``scipy.stats.t``'s own functions
(``scipy.special.stdtr`` and ``stdtrit``); the
formulas above (Welch's statistic and degrees of freedom, Fieller's quadratic)
are written out here because they *are* the stated method, once, on NumPy arrays
(:func:`ratio_estimates`: a fleet's comparison computes 26,000 ratios at once; one pair is an
array of one), and
tests/test_compare_stats.py checks them against ``scipy.stats.ttest_ind`` and a
Monte Carlo of the interval's coverage.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Iterable

from kit.results.ratios import ratio_digits, ratio_of_medians

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
#: What an interval without bounds is printed as. Fieller's interval of mean(num) / mean(den) has
#: no bounds when the divisor's mean is not clearly away from zero: its repeats spread so widely
#: (t x standard error >= mean) that a ratio of any size fits them.
UNBOUNDED = "[CI unbounded: {divisor} repeats vary too much]"


# --- Student t (scipy.stats) --------------------------------------------------------
# scipy is imported inside the functions: `import kit.cli.main` stays fast, and a
# command that never computes an interval never loads it. The code keeps to the API
# of scipy 1.5 (the cuda10 image renders reports with it, docker/locks/cuda10.txt).

_SPECIAL = None


def _special():
    """``scipy.special``: Student's t distribution function and its inverse (``stdtr``, ``stdtrit``),
    the functions ``scipy.stats.t`` computes its ``cdf``, ``sf`` and ``ppf`` with. Called directly:
    the same numbers without the distribution object's argument checks (a tenth of a millisecond a
    call, which a fleet of 500 machines pays thousands of times) or importing all of scipy.stats."""
    global _SPECIAL
    if _SPECIAL is None:
        from scipy import special

        _SPECIAL = special  # once: an import statement costs microseconds even when the module is loaded
    return _SPECIAL


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with ``df`` degrees of freedom (``scipy.stats.t.sf``)."""
    import numpy as np

    return float(_two_sided_p(np.array([t], dtype=np.float64), np.array([df], dtype=np.float64))[0])


def _two_sided_p(t, df):
    """:func:`t_two_sided_p` of arrays: 0 where |t| is infinite, NaN where df <= 0 or t is NaN."""
    import numpy as np

    with np.errstate(all="ignore"):
        p = 2.0 * _special().stdtr(df, -np.abs(t))
    return np.where(np.isinf(t), 0.0, np.where((df <= 0) | np.isnan(t), np.nan, p))


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) (``scipy.stats.t.cdf``)."""
    return float(_special().stdtr(df, t))


def t_quantile(q: float, df: float) -> float:
    """Inverse CDF of Student's t, q in (0, 1) (``scipy.stats.t.ppf``)."""
    if not 0.0 < q < 1.0:
        raise ValueError("quantile must be in (0, 1)")
    return float(_special().stdtrit(df, q))


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
        isfinite = math.isfinite
        xs = [float(v) for v in values if isinstance(v, (int, float)) and isfinite(v)]
        if not xs:
            return None
        return cls.of_floats(xs)

    @classmethod
    def of_floats(cls, xs: list[float]) -> "Sample":
        """:meth:`of` for values already known to be finite floats (at least one): a fleet's pooled
        repeats, thousands of them per machine, skip the per-value checks."""
        try:
            mean = math.fsum(xs) / len(xs)
            # plain float arithmetic: statistics.stdev is exact (Fractions) and 50x slower
            sd = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else 0.0
        except OverflowError:  # values near a float's limit (a final metric may be any finite number)
            mean, sd = _scaled_moments(xs)
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


def _scaled_moments(xs: list[float]) -> tuple[float, float]:
    """The mean and standard deviation of finite ``xs`` whose sums overflow a float: computed on the
    values divided by the largest magnitude, then scaled back (a result beyond a float is infinite,
    never an OverflowError)."""
    scale = max(abs(x) for x in xs)
    ys = [x / scale for x in xs]
    m = math.fsum(ys) / len(ys)
    sd = math.sqrt(math.fsum((y - m) * (y - m) for y in ys) / (len(ys) - 1)) if len(ys) > 1 else 0.0
    return m * scale, sd * scale


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

    def ci_text(self, decimals: int = 3, divisor: str = "the divisor's") -> str:
        """``[1.011, 1.018]``; where Fieller's interval has no bounds, why, in words, naming whose
        repeats (``divisor``: "the baseline's", "fp32's") make it so (:data:`UNBOUNDED`)."""
        if self.verdict == ONE_REPEAT:
            return "n/a"
        if self.ci_low is None or self.ci_high is None:
            return UNBOUNDED.format(divisor=divisor)
        return f"[{ratio_digits(self.ci_low, decimals)}, {ratio_digits(self.ci_high, decimals)}]"

    def to_dict(self) -> dict:
        # the fields in order (dataclasses.asdict's dict, without its deep copy: every field is a
        # number, None or a string, and a fleet's JSON has tens of thousands of these)
        d = {"ratio": self.ratio, "ci_low": self.ci_low, "ci_high": self.ci_high, "p_value": self.p_value,
             "df": self.df, "verdict": self.verdict, "mean_ratio": self.mean_ratio}
        d["point_estimate"] = "ratio of medians"
        d["ci_of"] = "ratio of means (Fieller, 95%)"
        d["median_outside_ci"] = self.outside_ci
        return d


def _columns(pairs: list) -> tuple:
    """n, mean and sd of each pair's two samples, as arrays (float64)."""
    import numpy as np

    return tuple(np.array([(x.n, x.mean, x.sd, y.n, y.mean, y.sd) for x, y in pairs], dtype=np.float64)
                 .reshape(len(pairs), 6).T)


def _welch(na, a, sa, nb, b, sb) -> tuple:
    """Welch's t, degrees of freedom and two-sided p for mean(a) - mean(b), element by element."""
    import numpy as np

    with np.errstate(all="ignore"):
        va, vb = sa**2 / na, sb**2 / nb
        se2 = va + vb
        diff = a - b
        # no spread at all (identical repeats): equal means are not different; different means are as
        # different as it gets
        still = se2 == 0.0
        df = np.where(still, na + nb - 2,
                      se2**2 / (np.where(va != 0, va**2 / (na - 1), 0.0) + np.where(vb != 0, vb**2 / (nb - 1), 0.0)))
        t = np.where(still, np.where(diff == 0, 0.0, np.copysign(np.inf, diff)), diff / np.sqrt(se2))
    p = np.where(still, np.where(diff == 0, 1.0, 0.0), _two_sided_p(t, df))
    return t, df, p


def _fieller(na, a, sa, nb, b, sb, level: float = 0.95) -> tuple:
    """Fieller's interval of mean(num)/mean(den), element by element: (low, high, df, flat,
    unbounded); flat: no spread on either side (the interval is the ratio itself); unbounded: the
    denominator is not clearly away from 0 (no interval)."""
    import numpy as np

    with np.errstate(all="ignore"):
        va, vb = sa**2 / na, sb**2 / nb
        r = a / b
        flat = (va == 0.0) & (vb == 0.0)
        denom = np.where(va != 0, va**2 / (na - 1), 0.0) + np.where(vb != 0, r**4 * vb**2 / (nb - 1), 0.0)
        df = np.where(flat, na + nb - 2, (va + r * r * vb) ** 2 / denom)
        t = _special().stdtrit(df, np.full(df.shape, 0.5 + level / 2.0))
        qa = b * b - t * t * vb
        root = np.sqrt(np.maximum(t * t * (va * qa + vb * a * a), 0.0))
        lo, hi = (a * b - root) / qa, (a * b + root) / qa
        low = np.where(flat, r, np.where(hi < lo, hi, lo))  # min() and max() as Python has them
        high = np.where(flat, r, np.where(hi > lo, hi, lo))
    return low, high, df, flat, ~flat & (qa <= 0.0)


def welch_t_test(a: Sample, b: Sample) -> tuple[float, float, float]:
    """(t, df, two-sided p) for mean(a) - mean(b); both samples need n >= 2."""
    t, df, p = _welch(*_columns([(a, b)]))
    return float(t[0]), float(df[0]), float(p[0])


def fieller_interval(num: Sample, den: Sample, level: float = 0.95) -> tuple[float | None, float | None, float]:
    """CI of mean(num)/mean(den) by Fieller's theorem; returns (low, high, df)."""
    low, high, df, _flat, unbounded = _fieller(*_columns([(num, den)]), level)
    if unbounded[0]:
        return None, None, float(df[0])
    return float(low[0]), float(high[0]), float(df[0])


def ratio_estimate(num: Sample, den: Sample, point: float | None = None) -> RatioEstimate | None:
    """The ratio of medians (or ``point``, computed by the caller with the same
    definition from the cells) with the CI of the ratio of means and Welch's
    verdict; None when a denominator is 0. One pair of :func:`ratio_estimates`."""
    return ratio_estimates([(num, den, point)])[0]


def ratio_estimates(pairs: Iterable[tuple[Sample, Sample, float | None]]) -> list[RatioEstimate | None]:
    """:func:`ratio_estimate` of each ``(num, den, point)``, computed as arrays (NumPy, and scipy's t
    distribution on arrays): a fleet's comparison has 26,000 ratios, which one at a time were most of
    its time. Where a variance is so small that its square underflows, the degrees of freedom come
    out infinite or NaN rather than as a ZeroDivisionError."""
    pairs = list(pairs)
    import numpy as np

    out: list[RatioEstimate | None] = [None] * len(pairs)
    at, todo, points = [], [], []
    for i, (num, den, point) in enumerate(pairs):
        if den.mean == 0:
            continue
        ratio = point if point is not None else ratio_of_medians([num.median], [den.median])
        if ratio is None:
            continue
        if num.n < 2 or den.n < 2:
            out[i] = RatioEstimate(ratio, None, None, None, None, ONE_REPEAT, num.mean / den.mean)
            continue
        at.append(i)
        todo.append((num, den))
        points.append(ratio)
    if not at:
        return out
    cols = _columns(todo)
    _t, _df, p = _welch(*cols)
    low, high, df, _flat, unbounded = _fieller(*cols)
    na, a, sa, nb, b, sb = cols
    with np.errstate(all="ignore"):
        mean_ratio = a / b
    for i, ratio, p_, df_, mr, low_, high_, none in zip(at, points, p.tolist(), df.tolist(), mean_ratio.tolist(),
                                                         low.tolist(), high.tolist(), unbounded.tolist()):
        if none:
            low_ = high_ = None
        out[i] = RatioEstimate(ratio, low_, high_, p_, df_, SIGNIFICANT if p_ < ALPHA else NOT_SIGNIFICANT, mr)
    return out


def rest_samples(values: list[list[float]]) -> list[Sample | None]:
    """For each member of a pool (``values``: each member's finite values), the :class:`Sample` of
    every other member's values pooled (what :meth:`Sample.of_floats` gives for them; None where there
    are none), without building a list of the rest per member: a fleet's cell is 200 machines of 600
    pooled repeats. The count, mean and standard deviation come from the pool's sums less the member's
    own (centred on the pool's mean, so nothing is lost to cancellation; equal to the last digits);
    the median, min and max are read from the pool sorted once, skipping the member's own values
    (found by bisection: ``numpy.searchsorted``)."""
    import numpy as np

    sizes = np.array([len(v) for v in values])
    pooled = np.sort(np.concatenate([np.asarray(v, dtype=np.float64) for v in values]))
    total = len(pooled)
    centre = math.fsum(pooled.tolist()) / total
    dev = pooled - centre
    s1, s2 = math.fsum(dev.tolist()), math.fsum((dev * dev).tolist())
    n = total - sizes
    own_s1 = np.array([math.fsum(x - centre for x in v) for v in values])
    own_s2 = np.array([math.fsum((x - centre) ** 2 for x in v) for v in values])
    with np.errstate(all="ignore"):
        mean = (s1 - own_s1) / n
        sd = np.sqrt(np.maximum((s2 - own_s2) - n * mean * mean, 0.0) / (n - 1))
    k = int(sizes.max())
    # each member's own values' positions in the pool, sorted, each once (equal values side by side)
    own = np.full((len(values), k), np.inf)
    for i, v in enumerate(values):
        own[i, :len(v)] = np.sort(v)
    pos = np.searchsorted(pooled, own, side="left")
    for j in range(1, k):
        pos[:, j] = np.maximum(pos[:, j], pos[:, j - 1] + 1)
    pos = np.where(np.isinf(own), total + 1, pos)

    def nth(rank):
        """The rank-th smallest of each member's rest: skip every own value at or before it."""
        at = np.array(rank, dtype=np.int64)
        for j in range(k):
            at = at + (pos[:, j] <= at)
        return pooled[np.minimum(at, total - 1)]

    half = n // 2
    odd = n % 2 == 1
    median = np.where(odd, nth(half), (nth(np.maximum(half - 1, 0)) + nth(half)) / 2.0)
    low, high = nth(np.zeros(len(values), dtype=np.int64)), nth(np.maximum(n - 1, 0))
    out: list[Sample | None] = []
    for i in range(len(values)):
        if n[i] == 0:
            out.append(None)
            continue
        lo, hi = float(low[i]), float(high[i])
        flat = lo == hi  # identical values have no spread (Welch's test treats that case on its own)
        out.append(Sample(int(n[i]), lo if flat else float(mean[i]) + centre, 0.0 if flat or n[i] < 2 else float(sd[i]),
                          float(median[i]), lo, hi))
    return out
