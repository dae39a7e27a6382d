"""The statistics behind `kit compare`: Student t (scipy.stats), Welch's test,
Fieller's interval, and the verdicts. Expected values are textbook table
values or are computed here by an independent method (numerical integration,
scipy's own Welch test on the raw repeats, the delta method, a Monte Carlo)."""

from __future__ import annotations

import math

import pytest

from kit.compare.stats import (
    NOT_SIGNIFICANT,
    ONE_REPEAT,
    SIGNIFICANT,
    Sample,
    fieller_interval,
    ratio_estimate,
    ratio_estimates,
    t_cdf,
    t_quantile,
    t_two_sided_p,
    welch_t_test,
)


def _t_pdf(x: float, df: float) -> float:
    c = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)
    return c * (1 + x * x / df) ** (-(df + 1) / 2)


def _simpson_cdf(t: float, df: float, n: int = 20000) -> float:
    """P(0 < T < t) + 0.5 by Simpson's rule: independent of scipy."""
    h = t / n
    s = _t_pdf(0, df) + _t_pdf(t, df) + sum((4 if i % 2 else 2) * _t_pdf(i * h, df) for i in range(1, n))
    return 0.5 + s * h / 3


@pytest.mark.parametrize("df, expected", [(1, 12.7062), (2, 4.3027), (4, 2.7764), (10, 2.2281), (30, 2.0423)])
def test_t_quantile_matches_the_textbook_table(df, expected):
    assert t_quantile(0.975, df) == pytest.approx(expected, abs=1e-4)


@pytest.mark.parametrize("t, df", [(0.5, 3), (1.7, 2.5), (2.2, 7.3), (4.0, 12)])
def test_t_cdf_agrees_with_numerical_integration(t, df):
    assert t_cdf(t, df) == pytest.approx(_simpson_cdf(t, df), abs=1e-8)
    assert t_two_sided_p(t, df) == pytest.approx(2 * (1 - _simpson_cdf(t, df)), abs=1e-8)


def test_welch_t_test_by_hand():
    a, b = Sample.of([1, 2, 3, 4]), Sample.of([2, 4, 6, 8, 10])
    t, df, p = welch_t_test(a, b)
    # mean 2.5 vs 6, variances 5/3 and 10: se^2 = 5/12 + 2 = 29/12
    assert t == pytest.approx(-3.5 / math.sqrt(29 / 12))
    assert df == pytest.approx((29 / 12) ** 2 / ((5 / 12) ** 2 / 3 + 2**2 / 4))
    assert p == pytest.approx(2 * (1 - _simpson_cdf(abs(t), df)), abs=1e-7)


def test_fieller_interval_with_an_exact_denominator_is_the_t_interval_scaled():
    # den has no spread, so the CI is (mean(num) +- t * se) / mean(den), df = n - 1 = 2
    est = ratio_estimate(Sample.of([9, 10, 11]), Sample.of([5, 5, 5]))
    half = 4.302653 * 1 / math.sqrt(3)
    assert est.ratio == 2.0
    assert est.ci_low == pytest.approx((10 - half) / 5, abs=1e-5)
    assert est.ci_high == pytest.approx((10 + half) / 5, abs=1e-5)
    assert est.df == pytest.approx(2.0)


def test_fieller_endpoints_solve_the_defining_equation():
    num, den = Sample.of([12.0, 12.5, 11.8, 12.2]), Sample.of([7.9, 8.4, 8.1])
    low, high, df = fieller_interval(num, den)
    va, vb = num.sd**2 / num.n, den.sd**2 / den.n
    t = t_quantile(0.975, df)
    for r in (low, high):
        assert (num.mean - r * den.mean) ** 2 == pytest.approx(t * t * (va + r * r * vb), rel=1e-9)
    assert low < num.mean / den.mean < high


def test_identical_samples_are_not_significant():
    s = Sample.of([10.0, 10.2, 9.8])
    est = ratio_estimate(s, s)
    assert est.ratio == 1.0 and est.p_value == pytest.approx(1.0) and est.verdict == NOT_SIGNIFICANT
    assert est.ci_low < 1.0 < est.ci_high


def test_clearly_different_samples_are_significant_and_the_ci_excludes_one():
    est = ratio_estimate(Sample.of([20.0, 20.1, 19.9]), Sample.of([10.0, 10.1, 9.9]))
    assert est.verdict == SIGNIFICANT and est.p_value < 1e-4
    assert 1.0 < est.ci_low < 2.0 < est.ci_high


def test_overlapping_noisy_samples_are_not_significant():
    est = ratio_estimate(Sample.of([10.0, 13.0, 8.0]), Sample.of([9.0, 11.5, 10.0]))
    assert est.verdict == NOT_SIGNIFICANT and est.p_value > 0.05


def test_a_single_repeat_gives_a_ratio_but_no_verdict():
    est = ratio_estimate(Sample.of([12.0]), Sample.of([6.0, 6.1]))
    assert est.ratio == pytest.approx(12 / 6.05)
    assert est.verdict == ONE_REPEAT and est.ci_low is None and est.p_value is None
    assert est.ci_text() == "n/a"


def test_zero_spread_samples_with_different_means_are_significant():
    est = ratio_estimate(Sample.of([2.0, 2.0]), Sample.of([1.0, 1.0]))
    assert est.verdict == SIGNIFICANT and est.ci_low == est.ci_high == 2.0


def test_denominator_indistinguishable_from_zero_gives_an_unbounded_interval():
    est = ratio_estimate(Sample.of([5.0, 5.1, 4.9]), Sample.of([0.1, -0.2, 0.3]))
    assert est.ci_low is None and est.ci_high is None


def test_an_unbounded_interval_says_why_where_it_is_printed():
    """The baseline's repeats spread so widely (CV 87% over 3) that no ratio can be ruled out:
    the interval is printed as that reason, naming whose repeats, never as a bare "unbounded"."""
    from kit.compare.fmt import fmt_speedup_estimate, fmt_vs_baseline

    est = ratio_estimate(Sample.of([4748.0, 4749.0, 4750.0]), Sample.of([200.0, 1000.0, 1800.0]))
    assert est.ci_low is None and est.ratio == pytest.approx(4.749)
    assert fmt_vs_baseline(est) == "4.749× [CI unbounded: the baseline's repeats vary too much]"
    assert fmt_speedup_estimate(est) == "4.75× [CI unbounded: fp32's repeats vary too much]"


def test_sample_from_a_results_summary():
    s = Sample.from_stats({"n": 3, "median": 10.0, "mean": 10.1, "min": 9.5, "max": 10.8, "stdev": 0.4, "cv": 0.04})
    assert (s.n, s.mean, s.sd, s.median, s.min, s.max) == (3, 10.1, 0.4, 10.0, 9.5, 10.8)
    assert Sample.from_stats({"median": 1}) is None


def test_the_point_estimate_is_the_ratio_of_medians_and_the_ci_that_of_the_means():
    est = ratio_estimate(Sample.of([9.0, 10.0, 20.0]), Sample.of([5.0, 5.0, 5.0]))
    assert est.ratio == 2.0 and est.mean_ratio == pytest.approx(13 / 5)
    d = est.to_dict()
    assert d["point_estimate"] == "ratio of medians" and d["ci_of"].startswith("ratio of means")


def test_a_median_outside_the_interval_of_the_means_is_marked():
    """Twenty repeats, a quarter of them slow: the mean (and its tight interval) moves, the median does not."""
    est = ratio_estimate(Sample.of([10.0] * 15 + [14.0] * 5), Sample.of([10.0, 10.01, 9.99] * 5))
    assert est.ratio == pytest.approx(1.0) and est.ci_low > 1.0 and est.outside_ci
    from kit.compare.fmt import fmt_speedup_estimate

    assert fmt_speedup_estimate(est).startswith("1.00×† [")
    inside = ratio_estimate(Sample.of([20.0, 20.1, 19.9]), Sample.of([10.0, 10.1, 9.9]))
    assert not inside.outside_ci and "†" not in fmt_speedup_estimate(inside)


# --- cross-checks against a second computation ----------------------------------------------------

NUM = [12.0, 12.5, 11.8, 12.2, 12.9]
DEN = [7.9, 8.4, 8.1, 8.6]


def test_welch_matches_scipys_ttest_ind_on_the_raw_repeats():
    from scipy import stats

    t, df, p = welch_t_test(Sample.of(NUM), Sample.of(DEN))
    ref = stats.ttest_ind(NUM, DEN, equal_var=False)
    assert t == pytest.approx(ref.statistic, rel=1e-12)
    assert p == pytest.approx(ref.pvalue, rel=1e-9)
    if hasattr(ref, "df"):  # scipy >= 1.11 reports the Welch-Satterthwaite df
        assert df == pytest.approx(ref.df, rel=1e-12)


def test_fieller_endpoints_are_where_scipys_welch_statistic_reaches_the_t_quantile():
    """At an endpoint R, Welch's t of num against R*den is exactly the critical value
    (Fieller's set is where |mean(num) - R mean(den)| / se(R) <= t): checked with
    scipy's Welch test on the scaled raw repeats, not with the kit's formulas."""
    from scipy import stats

    low, high, df = fieller_interval(Sample.of(NUM), Sample.of(DEN))
    crit = stats.t.ppf(0.975, df)
    assert stats.ttest_ind(NUM, [low * x for x in DEN], equal_var=False).statistic == pytest.approx(crit, rel=1e-9)
    assert stats.ttest_ind(NUM, [high * x for x in DEN], equal_var=False).statistic == pytest.approx(-crit, rel=1e-9)


@pytest.mark.filterwarnings("ignore:Precision loss occurred:RuntimeWarning")
def test_fieller_with_an_exact_denominator_is_scipys_welch_interval_scaled():
    """The denominator has no spread: the interval of the ratio is scipy's Welch interval of
    mean(num) - mean(den), shifted by and divided by mean(den)."""
    from scipy import stats

    ref = stats.ttest_ind(NUM, [8.0] * 4, equal_var=False)
    if not hasattr(ref, "confidence_interval"):
        pytest.skip("scipy < 1.10 has no TtestResult.confidence_interval()")
    ci = ref.confidence_interval(0.95)
    low, high, df = fieller_interval(Sample.of(NUM), Sample.of([8.0] * 4))
    assert df == pytest.approx(len(NUM) - 1)
    assert low == pytest.approx((ci.low + 8.0) / 8.0, rel=1e-9)
    assert high == pytest.approx((ci.high + 8.0) / 8.0, rel=1e-9)


def test_fieller_tends_to_the_delta_method_for_small_spread():
    """With a spread of 1e-5 of the means the denominator is far from zero, and Fieller's
    interval is the delta method's r +- t * sqrt(va + r^2 vb) / mean(den) to within 1e-9."""
    num = [100.0 * (1 + 1e-5 * d) for d in (-1.0, 0.5, 0.2, 1.3, -0.8)]
    den = [40.0 * (1 + 1e-5 * d) for d in (0.7, -1.1, 0.3, 0.4)]
    a, b = Sample.of(num), Sample.of(den)
    low, high, df = fieller_interval(a, b)
    r = a.mean / b.mean
    half = t_quantile(0.975, df) * math.sqrt(a.sd**2 / a.n + r * r * b.sd**2 / b.n) / b.mean
    assert low == pytest.approx(r - half, rel=1e-9) and high == pytest.approx(r + half, rel=1e-9)


def test_fieller_interval_covers_the_true_ratio_about_95_percent_of_the_time():
    """Monte Carlo on fixed seeds: 4000 pairs of normal samples (5 and 4 repeats, CV 5% and 8%,
    true ratio of means 1.5). Coverage of a 95% interval should be 0.95 within the simulation's
    noise (binomial sd 0.0034) and the approximation of Welch's df."""
    import numpy as np

    rng = np.random.default_rng(20240915)
    nums = rng.normal(15.0, 0.75, size=(4000, 5))
    dens = rng.normal(10.0, 0.8, size=(4000, 4))
    covered = 0
    for xs, ys in zip(nums.tolist(), dens.tolist()):
        low, high, _df = fieller_interval(Sample.of(xs), Sample.of(ys))
        covered += low is not None and low <= 1.5 <= high
    assert 0.935 <= covered / 4000 <= 0.965


def test_loading_the_cli_or_the_report_modules_loads_neither_scipy_nor_matplotlib():
    """Both are imported inside the functions that use them: `kit --help` and `kit doctor` stay fast."""
    import subprocess
    import sys

    code = ("import sys, kit.cli.main, kit.compare.stats, kit.report.html.run_report, kit.report.charts, kit.report.svg.plots; "
            "print(sorted(m for m in ('scipy', 'matplotlib', 'numpy', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_ratio_estimate_to_dict_is_the_dataclass_fields_in_order():
    """to_dict writes the fields itself (no dataclasses.asdict deep copy): the same keys, order and values."""
    import dataclasses

    from kit.compare.stats import Sample, ratio_estimate

    est = ratio_estimate(Sample.of([10.0, 10.5, 9.8]), Sample.of([8.0, 8.1, 7.9]))
    d = est.to_dict()
    assert list(d)[:len(dataclasses.fields(est))] == [f.name for f in dataclasses.fields(est)]
    assert {k: d[k] for k in dataclasses.asdict(est)} == dataclasses.asdict(est)


def test_json_text_is_the_same_json_value_with_rows_on_one_line_each():
    import json

    from kit.compare.json_text import json_text

    value = {"method": "m", "rows": [{"cell_id": "a/b", "machines": {"A": {"x": [1, 2.5, None, 1e16, 0.1 + 0.2]}}},
                                     {"cell_id": "c"}],
             "empty": [], "none": None, "nested": {"deep": {"deeper": [1, {"k": "v"}]}}, 3: True, "é": "ü\u2028"}
    text = json_text(value)
    assert json.loads(text) == json.loads(json.dumps(value))  # every float reads back equal
    lines = text.splitlines()
    assert '    {"cell_id":"a/b","machines":{"A":{"x":[1,2.5,null,1e+16,0.30000000000000004]}}},' in lines
    assert '  "3": true,' in lines


def test_json_text_is_standard_json_where_a_number_is_not_finite():
    """Python's json writes NaN and Infinity, which JSON does not have (jq, browsers and most
    parsers refuse them): the comparison writes null there."""
    import json

    from kit.compare.json_text import json_text

    def refuse(token):
        raise ValueError(f"not JSON: {token}")

    text = json_text({"rows": [{"p": float("nan"), "df": float("inf"), "lo": -float("inf"), "ok": 1.5}]})
    assert json.loads(text, parse_constant=refuse) == {"rows": [{"p": None, "df": None, "lo": None, "ok": 1.5}]}


def test_sample_cache_gives_what_sample_and_metric_values_give():
    from kit.compare import measures
    from kit.results import ratios
    from kit.results.schema import CellResult

    cell = CellResult("cifar", "resnet18", "fp32", "torch", "ok", throughput_unit="images",
                      repeats=[{"throughput_items_per_s": v, "epoch_seconds_median": 60.0 / v} for v in (100.0, 104.0, 98.0)])
    cache = measures.SampleCache()
    for metric in (ratios.THROUGHPUT, ratios.EPOCH_S, measures.ENERGY):
        assert cache.sample(cell, metric) == measures.sample(cell, metric)
        assert cache.sample(cell, metric) is cache.sample(cell, metric)  # computed once
        assert cache.values(cell, metric) == ratios.metric_values(cell, metric)


def _by_hand(num: Sample, den: Sample) -> tuple:
    """Welch's p and Fieller's interval for one pair, in plain floats (the textbook formulas, with
    scipy's t distribution): what the kit's array code must give for every pair of a batch."""
    from scipy import stats

    va, vb = num.sd ** 2 / num.n, den.sd ** 2 / den.n
    p = 2 * stats.t.sf(abs(num.mean - den.mean) / math.sqrt(va + vb),
                       (va + vb) ** 2 / (va ** 2 / (num.n - 1) + vb ** 2 / (den.n - 1)))
    r = num.mean / den.mean
    df = (va + r * r * vb) ** 2 / (va ** 2 / (num.n - 1) + r ** 4 * vb ** 2 / (den.n - 1))
    t = stats.t.ppf(0.975, df)
    qa = den.mean ** 2 - t * t * vb
    root = math.sqrt(t * t * (va * qa + vb * num.mean ** 2))
    return p, (num.mean * den.mean - root) / qa, (num.mean * den.mean + root) / qa, df


def test_a_batch_of_ratios_is_each_pair_on_its_own_and_each_by_hand():
    """kit.compare.stats.ratio_estimates (the arrays a fleet's 26,000 ratios are computed as): in a
    batch that mixes every branch (one repeat, no spread, a denominator of mean 0 or near 0, a given
    point, none) each pair gets what it gets alone, and the ordinary pairs what the formulas give."""
    import random

    rng = random.Random(7)
    ordinary = [(Sample.of([rng.gauss(100, 5) for _ in range(rng.randint(2, 6))]),
                 Sample.of([rng.gauss(80, 4) for _ in range(rng.randint(2, 6))]), None) for _ in range(40)]
    special = [
        (Sample.of([12.0]), Sample.of([6.0, 6.1]), None),  # one repeat
        (Sample.of([2.0, 2.0]), Sample.of([1.0, 1.0]), None),  # no spread, different means
        (Sample.of([2.0, 2.0]), Sample.of([2.0, 2.0]), None),  # no spread, equal means
        (Sample.of([5.0, 5.1, 4.9]), Sample.of([0.1, -0.2, 0.3]), None),  # unbounded
        (Sample.of([5.0, 5.1]), Sample.of([1.0, -1.0]), None),  # a denominator of mean 0
        (Sample.of([5.0, 5.1]), Sample.of([4.0, 4.2]), 1.25),  # the caller's point
        (Sample.of([5.0, 5.1]), Sample.of([0.0, 0.0, 1.0]), None),  # a denominator of median 0
    ]
    pairs = ordinary[:20] + special + ordinary[20:]
    batch = ratio_estimates(pairs)
    assert batch == [ratio_estimate(*pair) for pair in pairs]
    got = dict(zip(map(id, pairs), batch))
    assert got[id(special[0])].verdict == ONE_REPEAT
    assert got[id(special[1])].verdict == SIGNIFICANT and got[id(special[1])].ci_low == 2.0
    assert got[id(special[2])].verdict == NOT_SIGNIFICANT and got[id(special[2])].p_value == 1.0
    assert got[id(special[3])].ci_low is None and got[id(special[3])].ci_high is None
    assert got[id(special[4])] is None and got[id(special[6])] is None
    assert got[id(special[5])].ratio == 1.25
    for num, den, _ in ordinary:
        est = ratio_estimate(num, den)
        p, low, high, df = _by_hand(num, den)
        assert est.ratio == num.median / den.median
        assert (est.p_value, est.ci_low, est.ci_high, est.df) == pytest.approx((p, low, high, df), rel=1e-9)
        assert est.verdict == (SIGNIFICANT if p < 0.05 else NOT_SIGNIFICANT)


def test_a_variance_whose_square_underflows_is_no_traceback():
    """sd**2 / n of 1e-160 squared is 0 in floats: the degrees of freedom have nothing to divide by."""
    est = ratio_estimate(Sample(2, 1.0, 1e-160, 1.0, 1.0, 1.0), Sample(2, 1.0, 1e-160, 1.0, 1.0, 1.0))
    assert est is not None and est.verdict in (SIGNIFICANT, NOT_SIGNIFICANT)


def test_a_ratio_too_small_for_its_decimals_keeps_significant_digits():
    """A machine 2,400 times slower than the baseline reads 0.000420×, not 0.000×, in every view
    (they all print through kit.compare.fmt); its interval's bounds too."""
    from kit.compare.fmt import fmt_speedup_estimate, fmt_vs_baseline

    est = ratio_estimate(Sample.of([0.42, 0.43, 0.41]), Sample.of([1000.0, 1001.0, 999.0]))
    text = fmt_vs_baseline(est)
    assert text.startswith("0.000420× [0.000") and "0.000×" not in text and "0.000," not in text, text
    low, high = (float(x) for x in text.split("[")[1].rstrip("]").split(", "))
    assert low < est.ratio < high and low > 0
    slow_speedup = ratio_estimate(Sample.of([4.0, 4.1, 3.9]), Sample.of([1000.0, 1001.0, 999.0]))
    assert fmt_speedup_estimate(slow_speedup).startswith("0.0040× [0.00")


@pytest.mark.parametrize("value, decimals, shown", [
    (2.449, 2, "2.45×"), (0.0123, 3, "0.012×"), (0.00042, 3, "0.000420×"), (0.004, 2, "0.0040×"),
    (4.2e-7, 3, "0.000000420×"), (1e-12, 3, "<0.000000001×"), (0.0, 3, "0.000×"), (None, 3, "—"),
])
def test_ratio_text(value, decimals, shown):
    from kit.results.ratios import fmt_ratio

    assert fmt_ratio(value, decimals) == shown
