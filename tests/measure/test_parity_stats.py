"""The paired-gap statistics against external oracles: closed forms of Student's t, a published t-table, sums by hand.

The t-table values are those of NIST/SEMATECH e-Handbook of Statistical Methods, section 1.3.6.7.2
("Critical Values of the Student's t Distribution"), printed to 3 decimals.
"""

import math
import statistics

import pytest

from slim_mp.measure.parity.paired_stats import (EQUIVALENT, INCONCLUSIVE, NOT_EQUIVALENT, TOO_FEW_SEEDS, paired_gap,
                                                 regularized_incomplete_beta, t_cdf, t_quantile)

CLOSED_FORM_TOLERANCE = 1e-12
TABLE_TOLERANCE = 0.0005  # the table's last printed decimal, rounded
# (upper-tail probability, degrees of freedom) -> critical value, from the NIST table.
T_TABLE = {
    (0.025, 1): 12.706, (0.025, 2): 4.303, (0.025, 7): 2.365, (0.025, 9): 2.262, (0.025, 15): 2.131,
    (0.025, 30): 2.042, (0.05, 9): 1.833, (0.05, 7): 1.895, (0.001, 7): 4.785, (0.0005, 7): 5.408,
}


@pytest.mark.parametrize("t", [-30.0, -2.5, -0.3, 0.0, 0.7, 4.0, 250.0])
def test_t_cdf_matches_the_closed_forms_for_one_and_two_degrees_of_freedom(t):
    assert t_cdf(t, 1) == pytest.approx(0.5 + math.atan(t) / math.pi, abs=CLOSED_FORM_TOLERANCE)  # Cauchy
    assert t_cdf(t, 2) == pytest.approx(0.5 + t / (2 * math.sqrt(t * t + 2)), abs=CLOSED_FORM_TOLERANCE)


@pytest.mark.parametrize("t", [-3.0, -1.0, 0.5, 1.96])
def test_t_cdf_tends_to_the_normal_for_many_degrees_of_freedom(t):
    # The difference is O(1/df): at df = 1e6 well below 1e-5.
    assert t_cdf(t, 1e6) == pytest.approx(statistics.NormalDist().cdf(t), abs=1e-5)


def test_the_incomplete_beta_matches_closed_forms_on_both_sides_of_its_switch():
    for x in (0.05, 0.3, 0.6, 0.95):
        assert regularized_incomplete_beta(1, 1, x) == pytest.approx(x, abs=CLOSED_FORM_TOLERANCE)
        assert regularized_incomplete_beta(2, 1, x) == pytest.approx(x * x, abs=CLOSED_FORM_TOLERANCE)
        assert regularized_incomplete_beta(1, 3, x) == pytest.approx(1 - (1 - x) ** 3, abs=CLOSED_FORM_TOLERANCE)
    assert regularized_incomplete_beta(2.5, 0.5, 0.0) == 0.0 and regularized_incomplete_beta(2.5, 0.5, 1.0) == 1.0


@pytest.mark.parametrize("tail, df", sorted(T_TABLE))
def test_t_quantile_reproduces_the_published_table(tail, df):
    assert t_quantile(1 - tail, df) == pytest.approx(T_TABLE[tail, df], abs=TABLE_TOLERANCE)
    assert t_quantile(tail, df) == pytest.approx(-T_TABLE[tail, df], abs=TABLE_TOLERANCE)


def test_an_equivalent_gap_computed_by_hand():
    # Eight gaps of +0.3 and -0.1 pp alternating: mean 0.1, deviations +-0.2, sum of squares 8 * 0.04 = 0.32,
    # s = sqrt(0.32 / 7) = 0.213809, standard error s / sqrt(8) = 0.0755929, t(0.975, 7) = 2.365 (table):
    # half width 0.178777, interval [-0.0788, +0.2788] inside +-0.5: equivalent.
    gap = paired_gap([0.3, -0.1] * 4, margin=0.5)
    assert (gap.n, gap.verdict) == (8, EQUIVALENT)
    assert gap.mean == pytest.approx(0.1, abs=1e-12) and gap.std == pytest.approx(0.213809, abs=1e-6)
    assert gap.low == pytest.approx(0.1 - 2.365 * 0.0755929, abs=2e-4)
    assert gap.high == pytest.approx(0.1 + 2.365 * 0.0755929, abs=2e-4)
    # The binding one-sided test: t = (0.1 - 0.5) / 0.0755929 = -5.2915, between the table's 4.785 (0.001) and
    # 5.408 (0.0005) for 7 degrees of freedom.
    assert 0.0005 < gap.tost_p < 0.001


def test_a_wide_interval_is_inconclusive_and_one_outside_the_margin_is_not_equivalent():
    # Gaps +-1 around 0: s = sqrt(8 / 7) = 1.069, half width 2.365 * 1.069 / sqrt(8) = 0.894 > 0.5.
    wide = paired_gap([1.0, -1.0] * 4, margin=0.5)
    assert wide.verdict == INCONCLUSIVE and wide.low < -0.5 < 0.5 < wide.high and wide.tost_p > 0.025
    # The same spread around -3: the whole interval lies below -0.5.
    below = paired_gap([-2.0, -4.0] * 4, margin=0.5)
    assert below.verdict == NOT_EQUIVALENT and below.high < -0.5 and below.tost_p > 0.5


def test_the_verdict_agrees_with_the_interval_and_the_tost_p_value():
    for centre in (-0.6, -0.45, -0.2, 0.0, 0.3, 0.42, 0.55):
        gap = paired_gap([centre + 0.1, centre - 0.1, centre + 0.05, centre - 0.05, centre], margin=0.5)
        inside = -0.5 < gap.low and gap.high < 0.5
        assert (gap.verdict == EQUIVALENT) == inside == (gap.tost_p < 0.025), centre


def test_one_seed_has_no_interval_and_bad_input_is_refused():
    single = paired_gap([0.2], margin=0.5)
    assert (single.mean, single.std, single.low, single.tost_p, single.verdict) == (0.2, None, None, None,
                                                                                     TOO_FEW_SEEDS)
    with pytest.raises(ValueError, match="at least one gap"):
        paired_gap([], margin=0.5)
    with pytest.raises(ValueError, match="margin=0 must be positive"):
        paired_gap([0.1, 0.2], margin=0)
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        t_quantile(1.0, 3)
