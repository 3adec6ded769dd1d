"""The paired gap over seeds: its 95% confidence interval (paired t) and an equivalence verdict (TOST).

Per seed, the mixed-precision run and the float32 run start from the same weights and read the
same batches, so their top-1 difference is one paired observation. Over ``n`` seeds the mean gap
has the standard error ``s / sqrt(n)`` and, the gaps being roughly normal, Student's t with
``n - 1`` degrees of freedom gives its interval. Equivalence within a margin ``m`` is tested by two
one-sided t tests (TOST: gap > -m and gap < +m), each at 2.5%, which is the same as the 95%
interval lying inside ``(-m, +m)``: the verdict and the interval shown never disagree. (The common
TOST at 5% per side would accept a 90% interval; this is stricter.)

Student's t is computed here from the regularized incomplete beta function (a continued fraction,
DLMF 8.17.22), so no statistics package is needed; the tests check it against closed forms and a
published t-table.
"""

import dataclasses
import math
import statistics
from typing import Optional, Sequence

CONFIDENCE = 0.95
ONE_SIDED_ALPHA = (1 - CONFIDENCE) / 2
EQUIVALENT = "equivalent"
NOT_EQUIVALENT = "not equivalent"
INCONCLUSIVE = "inconclusive"
TOO_FEW_SEEDS = "too few seeds"
_FRACTION_TINY = 1e-300
_FRACTION_TOLERANCE = 1e-15
_FRACTION_TERMS = 500
_QUANTILE_TOLERANCE = 1e-12


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of I_x(a, b) (DLMF 8.17.22), evaluated by the modified Lentz method."""
    numerator_factor, denominator = 1.0, 1.0 - (a + b) * x / (a + 1)
    denominator = 1 / (denominator if abs(denominator) > _FRACTION_TINY else _FRACTION_TINY)
    value = denominator
    for m in range(1, _FRACTION_TERMS):
        for coefficient in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            denominator = 1 + coefficient * denominator
            denominator = 1 / (denominator if abs(denominator) > _FRACTION_TINY else _FRACTION_TINY)
            numerator_factor = 1 + coefficient / numerator_factor
            numerator_factor = numerator_factor if abs(numerator_factor) > _FRACTION_TINY else _FRACTION_TINY
            step = denominator * numerator_factor
            value *= step
        if abs(step - 1) < _FRACTION_TOLERANCE:
            return value
    raise ArithmeticError(f"the incomplete beta fraction did not converge for a={a}, b={b}, x={x}")


def regularized_incomplete_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b) for a, b > 0 and 0 <= x <= 1."""
    if x <= 0 or x >= 1:
        return 0.0 if x <= 0 else 1.0
    log_front = a * math.log(x) + b * math.log1p(-x) + math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    if x < (a + 1) / (a + b + 2):  # where the fraction converges fast; else use I_x(a, b) = 1 - I_{1-x}(b, a)
        return math.exp(log_front) * _beta_fraction(a, b, x) / a
    return 1 - math.exp(log_front) * _beta_fraction(b, a, 1 - x) / b


def t_cdf(t: float, degrees_of_freedom: float) -> float:
    """P(T <= t) for Student's t with ``degrees_of_freedom`` (> 0)."""
    tail = 0.5 * regularized_incomplete_beta(degrees_of_freedom / 2, 0.5,
                                              degrees_of_freedom / (degrees_of_freedom + t * t))
    return 1 - tail if t > 0 else tail


def t_quantile(probability: float, degrees_of_freedom: float) -> float:
    """The t with P(T <= t) = ``probability`` (0 < probability < 1), by bisection on ``t_cdf``."""
    if not 0 < probability < 1:
        raise ValueError(f"probability={probability} must lie strictly between 0 and 1.")
    if probability < 0.5:
        return -t_quantile(1 - probability, degrees_of_freedom)
    low, high = 0.0, 1.0
    while t_cdf(high, degrees_of_freedom) < probability:
        low, high = high, 2 * high
    while high - low > _QUANTILE_TOLERANCE * max(1.0, high):
        middle = (low + high) / 2
        low, high = (middle, high) if t_cdf(middle, degrees_of_freedom) < probability else (low, middle)
    return (low + high) / 2


@dataclasses.dataclass(frozen=True)
class PairedGap:
    """The paired gaps of ``n`` seeds, summarised against an equivalence ``margin`` (all in the gaps' unit).

    ``low``/``high``: the 95% confidence interval of the mean gap; ``tost_p``: the larger of the two
    one-sided p-values (equivalence shown when below 2.5%). ``verdict``: ``equivalent`` (interval
    inside the margin), ``not equivalent`` (interval wholly outside it), ``inconclusive`` (neither:
    more seeds would tell), or ``too few seeds`` (n < 2: no interval). Interval, p and verdict are None
    or ``too few seeds`` for one seed.
    """

    n: int
    mean: float
    std: Optional[float]
    low: Optional[float]
    high: Optional[float]
    margin: float
    tost_p: Optional[float]
    verdict: str


def _verdict(low: float, high: float, margin: float) -> str:
    if -margin < low and high < margin:
        return EQUIVALENT
    if high < -margin or low > margin:
        return NOT_EQUIVALENT
    return INCONCLUSIVE


def paired_gap(gaps: Sequence[float], margin: float) -> PairedGap:
    """Summarise per-seed ``gaps`` (e.g. mixed minus float32 top-1) against ``margin`` (> 0, same unit)."""
    if not gaps:
        raise ValueError("paired_gap needs at least one gap.")
    if not margin > 0:
        raise ValueError(f"margin={margin} must be positive.")
    n, mean = len(gaps), statistics.fmean(gaps)
    if n < 2:
        return PairedGap(n, mean, None, None, None, margin, None, TOO_FEW_SEEDS)
    std = statistics.stdev(gaps)
    standard_error = std / math.sqrt(n)
    degrees_of_freedom = n - 1
    half_width = t_quantile(1 - ONE_SIDED_ALPHA, degrees_of_freedom) * standard_error
    low, high = mean - half_width, mean + half_width
    if standard_error == 0:
        tost_p = 0.0 if abs(mean) < margin else 1.0
    else:  # H0 gap <= -margin, rejected for large t; H0 gap >= +margin, rejected for small t
        tost_p = max(1 - t_cdf((mean + margin) / standard_error, degrees_of_freedom),
                     t_cdf((mean - margin) / standard_error, degrees_of_freedom))
    return PairedGap(n, mean, std, low, high, margin, tost_p, _verdict(low, high, margin))
