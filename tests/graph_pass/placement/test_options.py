"""How the placement is asked for (``options``): the placement names, the flag, the fixed-timings rule."""

import dataclasses
import json

import pytest

from slim_mp.graph_pass import placement
from slim_mp.graph_pass.placement import PlacementFiles, PlacementMeasuring, PlacementOptions
from slim_mp.graph_pass.placement.options import Placement
from slim_mp.graph_pass.rewrite import rewrite

from .fakes import conv_chain, placement_options, refuse


def test_static_placement_measures_nothing(tmp_path):
    graph, loss = conv_chain()
    with graph.as_default():
        report = rewrite(loss, "bfloat16", device_type="CPU", placement="static",
                         placement_options=placement_options(cache_dir=str(tmp_path), measure=refuse))
    assert report.placement is None and report.ops_converted >= 1


def test_unknown_placement_is_rejected():
    with pytest.raises(ValueError, match="placement='fastest' is not a placement; use 'measured' or 'static'"):
        placement.resolve_placement("fastest")


def test_mp_placement_flag_is_checked_and_passed_to_the_rewrite():
    from slim_mp.training.precision_flags import PrecisionOptions

    with pytest.raises(ValueError, match="--mp_placement=fastest: placement='fastest' is not a placement"):
        PrecisionOptions(precision="bfloat16", mp_placement="fastest")
    assert PrecisionOptions(precision="bfloat16", mp_placement="static").rewrite_options().placement == "static"


def test_placement_names_are_their_own_strings_in_text_and_json():
    assert placement.PLACEMENTS == ("measured", "static")
    resolved = placement.resolve_placement("measured")
    assert resolved == "measured" and f"{resolved}" == "measured" and json.dumps(resolved) == '"measured"'
    assert resolved == Placement.MEASURED and type(resolved) is str, "a config's repr prints it as before"


def test_an_injected_measure_wins_over_a_fixed_timings_file_which_stops_whole_steps(tmp_path, monkeypatch):
    path = str(tmp_path / "timings.json")
    monkeypatch.delenv(placement.TIMINGS_FILE_ENV, raising=False)
    fake = PlacementMeasuring(measure=lambda signatures, precision: {})
    assert PlacementOptions().fixed_timings() is None and PlacementOptions().times_whole_steps()
    assert PlacementOptions(PlacementFiles(timings_file=path)).fixed_timings() == path
    assert not PlacementOptions(PlacementFiles(timings_file=path)).times_whole_steps()
    assert PlacementOptions(PlacementFiles(timings_file=path), fake).fixed_timings() is None
    monkeypatch.setenv(placement.TIMINGS_FILE_ENV, path)
    assert PlacementOptions().fixed_timings() == path, "the environment names the file too"
    assert not PlacementOptions(measuring=dataclasses.replace(fake, time_steps=False)).times_whole_steps()


def test_a_record_in_the_wrong_place_is_refused_naming_the_one_expected():
    with pytest.raises(TypeError, match=r"PlacementOptions\(files=...\) must be a PlacementFiles, got "
                                        "PlacementMeasuring"):
        PlacementOptions(PlacementMeasuring(time_steps=False))


def test_the_training_apps_placement_options_are_built_once_from_the_run_and_the_target():
    from slim_mp.training.precision_flags import PrecisionOptions

    target = placement.MeasuringTarget(device="/device:CPU:0", training=False)
    files = PlacementFiles(decisions_file="run/placement.json", write_decisions=False, wait_seconds=5.0)
    built = PrecisionOptions(precision="bfloat16").rewrite_options(target, files).placement_options
    assert built == PlacementOptions(files, PlacementMeasuring(target=target))
    assert PrecisionOptions(precision="bfloat16").rewrite_options().placement_options == PlacementOptions()
