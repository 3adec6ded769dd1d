"""The timing cache and fixed timings files (``timing_cache``): a hit measures nothing, damage is a
warning, the key is the device.
"""

import json
import os

import pytest
import tensorflow as tf

from slim_mp.graph_pass.placement import OpTiming, target

from .fakes import FakeMeasure, refuse, refuse_steps, conv_chain, measured_rewrite


def test_cache_hit_measures_nothing(tmp_path):
    measure = FakeMeasure({"Conv2D": OpTiming(1.0, 3.0)})
    measured_rewrite(conv_chain()[1], tmp_path, measure)
    assert measure.asked
    cached = os.listdir(tmp_path / "cache")
    assert len(cached) == 1 and cached[0].endswith(".json")
    report = measured_rewrite(conv_chain()[1], tmp_path, refuse)
    assert set(report.placement.float32_ops) == {"conv0"}
    assert report.placement.cached_signatures == 3 and report.placement.measured_signatures == 0


def test_a_signature_that_could_not_be_timed_is_remembered_and_not_asked_for_again(tmp_path):
    # The ops that follow the convolution low (Relu, Square, Mean) are timed too; the fake cannot time them.
    measure = FakeMeasure({"Conv2D": OpTiming(1.0, 3.0)})
    measured_rewrite(conv_chain()[1], tmp_path, measure, time_followers=True)
    assert {s.op_type for s in measure.asked} == {"Conv2D", "Cast", "Relu", "Square", "Mean"}
    report = measured_rewrite(conv_chain()[1], tmp_path, refuse, time_followers=True)
    assert report.placement.cached_signatures == 6 and report.placement.measured_signatures == 0


def test_cache_is_keyed_by_device_and_tensorflow_version(tmp_path, monkeypatch):
    measured_rewrite(conv_chain()[1], tmp_path, FakeMeasure({"Conv2D": OpTiming(1.0, 3.0)}))
    other = target.detect_device().__class__("CPU", "another CPU model")
    monkeypatch.setattr(target, "detect_device", lambda: other)
    measure = FakeMeasure({"Conv2D": OpTiming(1.0, 3.0)})
    measured_rewrite(conv_chain()[1], tmp_path, measure)
    assert measure.asked, "another device must not reuse this device's timings"
    (stored,) = [json.load(open(tmp_path / "cache" / n)) for n in os.listdir(tmp_path / "cache")
                 if "another CPU model" in open(tmp_path / "cache" / n).read()]
    assert stored["tensorflow"] == tf.__version__


def test_damaged_timing_cache_warns_and_measures_again(tmp_path):
    measured_rewrite(conv_chain()[1], tmp_path, FakeMeasure({"Conv2D": OpTiming(1.0, 3.0)}))
    (cached,) = os.listdir(tmp_path / "cache")
    (tmp_path / "cache" / cached).write_text('{"device": "x", "timings": {"k": "not a list"}}')
    measure = FakeMeasure({"Conv2D": OpTiming(1.0, 3.0)})
    with pytest.warns(UserWarning, match="ignoring the damaged timing cache .*timings_.*json"):
        report = measured_rewrite(conv_chain()[1], tmp_path, measure)
    assert measure.asked and set(report.placement.float32_ops) == {"conv0"}
    assert json.load(open(tmp_path / "cache" / cached))["timings"], "the next store rewrites the file whole"


def test_a_timing_cache_of_the_old_schema_is_ignored_with_a_warning(tmp_path):
    measured_rewrite(conv_chain()[1], tmp_path, FakeMeasure({"Conv2D": OpTiming(1.0, 3.0)}))
    (cached,) = os.listdir(tmp_path / "cache")
    stored = json.load(open(tmp_path / "cache" / cached))
    del stored["schema"]
    stored["timings"] = {key: value[:2] for key, value in stored["timings"].items()}  # pairs, no noise
    (tmp_path / "cache" / cached).write_text(json.dumps(stored))
    measure = FakeMeasure({"Conv2D": OpTiming(1.0, 3.0)})
    with pytest.warns(UserWarning, match=r"ignoring the timing cache .*timings_.*json: it has schema 1, this "
                                         r"slim_mp reads schema 3"):
        report = measured_rewrite(conv_chain()[1], tmp_path, measure)
    assert measure.asked and set(report.placement.float32_ops) == {"conv0"}
    assert json.load(open(tmp_path / "cache" / cached))["schema"] == 3, "the next store rewrites the file whole"


def test_fixed_timings_file_decides_without_measuring(tmp_path):
    path = tmp_path / "timings.json"
    path.write_text(json.dumps({"bfloat16": {"Conv2D": [1.0, 3.0], "*": [1.0, 0.5], "Cast": [0.0, 0.001]}}))
    report = measured_rewrite(conv_chain()[1], tmp_path, None, timings_file=str(path), measure_steps=refuse_steps)
    assert set(report.placement.float32_ops) == {"conv0"}
    assert report.placement.source == f"fixed timings from {path}"
    path.write_text(json.dumps({"float16": {"*": [1.0, 0.5]}}))
    with pytest.raises(ValueError, match=r"timings.json: needs 'bfloat16'"):
        measured_rewrite(conv_chain()[1], tmp_path, None, timings_file=str(path))


def test_the_cache_says_whether_every_op_timing_is_there(tmp_path):
    from slim_mp.graph_pass.placement.signatures import cast_signature
    from slim_mp.graph_pass.placement.timing_cache import TimingCache

    cache = TimingCache(str(tmp_path), "test device", tf.bfloat16)
    small, large = cast_signature(64), cast_signature(128)
    cache.add({small.key(): [0.0, 0.01, 0.0], f"check|{small.key()}": [5.0, 0.1]})
    assert cache.has_op_timings([small]) and not cache.has_op_timings([small, large])
    assert cache.has_op_timings([]), "nothing to time"
