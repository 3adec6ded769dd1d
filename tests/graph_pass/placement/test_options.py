"""How the placement is asked for (``options``): the placement names, the flag, the fixed-timings rule."""

import pytest

from slim_mp.graph_pass import placement
from slim_mp.graph_pass.placement import PlacementOptions
from slim_mp.graph_pass.rewrite import rewrite

from .fakes import refuse, conv_chain


def test_static_placement_measures_nothing(tmp_path):
    graph, loss = conv_chain()
    with graph.as_default():
        report = rewrite(loss, "bfloat16", device_type="CPU", placement="static",
                         placement_options=PlacementOptions(cache_dir=str(tmp_path), measure=refuse))
    assert report.placement is None and report.ops_converted >= 1


def test_unknown_placement_is_rejected():
    with pytest.raises(ValueError, match="placement='fastest' is not a placement; use 'measured' or 'static'"):
        placement.resolve_placement("fastest")


def test_mp_placement_flag_is_checked_and_passed_to_the_rewrite():
    from slim_mp.training.precision_flags import PrecisionOptions

    with pytest.raises(ValueError, match="--mp_placement=fastest: placement='fastest' is not a placement"):
        PrecisionOptions(precision="bfloat16", mp_placement="fastest")
    assert PrecisionOptions(precision="bfloat16", mp_placement="static").rewrite_options().placement == "static"
