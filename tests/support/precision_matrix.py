"""Which (network, precision) build checks run in the default suite and which wait for the slow tests."""

from typing import Iterable, List, Sequence

import pytest


def alternating_precision_cases(names: Sequence[str], precisions: Sequence[str],
                                slow_names: Iterable[str] = ()) -> List:
    """Every (name, precision) pair as a ``pytest.param``; one precision per name runs by default.

    The default precision takes turns down ``names`` (the first name gets ``precisions[0]``, the
    next ``precisions[1]``, ...), so each name and each precision stay in the default suite while
    the builds there halve; every other pair, and every pair of a name in ``slow_names``, is
    marked slow.
    """
    slow_names = set(slow_names)
    cases = []
    for index, name in enumerate(names):
        for precision in precisions:
            quick = name not in slow_names and precision == precisions[index % len(precisions)]
            cases.append(pytest.param(name, precision, marks=() if quick else pytest.mark.slow))
    return cases
