"""The per-op estimate (``estimate``): the cast cost model and the margin the estimate charges."""

import numpy as np
import pytest
import tensorflow as tf

from slim_mp.graph_pass.op_classes import default_classes
from slim_mp.graph_pass.paint import PaintConfig
from slim_mp.graph_pass.placement import Candidate, OpSignature, OpTiming, PlacementMeasuring
from slim_mp.graph_pass.placement.candidate import all_float32_candidate, static_candidate
from slim_mp.graph_pass.placement.estimate import CastModel, Estimator, fit_cast_model, low_regions
from slim_mp.graph_pass.placement.signatures import cast_signature
from slim_mp.graph_pass.region import select_region

from .fakes import conv_chain


def test_cast_model_fits_the_two_sizes():
    sizes = PlacementMeasuring().cast_sizes
    small, large = (cast_signature(n) for n in sizes)
    model = fit_cast_model({small: OpTiming(0.0, 0.1), large: OpTiming(0.0, 1.1)}, sizes)
    np.testing.assert_allclose(model.ms(sizes[0]), 0.1, rtol=1e-9)
    np.testing.assert_allclose(model.ms(sizes[1]), 1.1, rtol=1e-9)
    assert OpSignature("Cast", ((10,),)) == cast_signature(10)


def test_the_estimate_charges_the_margin_on_low_ops_only_and_adds_the_casts():
    graph, loss = conv_chain(2)
    config = PaintConfig(tf.bfloat16, default_classes(tf.bfloat16), [], "CPU")
    timings = {"conv0": OpTiming(1.0, 0.5), "conv1": OpTiming(2.0, 1.0)}
    with graph.as_default():
        region = select_region(loss)
        free_casts = Estimator(region, config, timings, CastModel(0.0, 0.0), margin=0.2)
        costly_casts = Estimator(region, config, timings, CastModel(1.0, 0.0), margin=0.2)
        assert free_casts(all_float32_candidate(timings)) == pytest.approx(3.0)
        assert free_casts(static_candidate()) == pytest.approx(1.5 * 1.2)
        assert free_casts(Candidate(frozenset({"conv1"}))) == pytest.approx(0.5 * 1.2 + 2.0)
        assert costly_casts(static_candidate()) > free_casts(static_candidate()), "lowering costs casts"
        assert low_regions(region, set(free_casts.painted(static_candidate())[1]), set(timings)) == [
            frozenset({"conv0", "conv1"})], "the two convs are one connected low region"


def test_an_inference_step_pays_the_forward_cast_only_half_of_each_modelled_pair():
    graph, loss = conv_chain(2)
    config = PaintConfig(tf.bfloat16, default_classes(tf.bfloat16), [], "CPU")
    timings = {"conv0": OpTiming(1.0, 0.5), "conv1": OpTiming(2.0, 1.0)}
    with graph.as_default():
        region = select_region(loss)
        training = Estimator(region, config, timings, CastModel(1.0, 0.0), margin=0.0)
        inference = Estimator(region, config, timings, CastModel(1.0, 0.0, training=False), margin=0.0)
        ops_ms = 1.5  # both convolutions low
        training_casts = training(static_candidate()) - ops_ms
        assert training_casts >= 1.0, "at least the input's cast pair"
        assert inference(static_candidate()) - ops_ms == pytest.approx(training_casts / 2)
        assert inference.with_margin(0.2)(static_candidate()) == pytest.approx(1.5 * 1.2 + training_casts / 2)


def test_a_served_graph_with_frozen_weights_pays_no_weight_casts():
    graph, loss = conv_chain(2)  # two convolutions, each reading one weight variable
    config = PaintConfig(tf.bfloat16, default_classes(tf.bfloat16), [], "CPU")
    timings = {"conv0": OpTiming(1.0, 0.5), "conv1": OpTiming(2.0, 1.0)}
    with graph.as_default():
        region = select_region(loss)
        inference = Estimator(region, config, timings, CastModel(1.0, 0.0, training=False), margin=0.0)
        served = Estimator(region, config, timings, CastModel(1.0, 0.0, training=False, frozen_weights=True), 0.0)
        assert inference(static_candidate()) - served(static_candidate()) == pytest.approx(2 * 0.5)
        assert served(all_float32_candidate(timings)) == inference(all_float32_candidate(timings)) == pytest.approx(3.0)
