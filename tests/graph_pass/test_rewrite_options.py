"""``RewriteOptions``: the pass's options as one checked value, and the keyword entry points built on it."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

import slim_mp
from slim_mp.graph_pass import RewriteOptions

tf1 = tf.compat.v1


def _conv_loss():
    """images -> conv1 -> relu -> conv2 -> mean: two allow ops, for counting what goes low."""
    images = tf1.placeholder(tf.float32, [1, 8, 8, 3], name="images")
    net = images
    for name in ("conv1", "conv2"):
        kernel = tf1.get_variable(f"{name}/weights", [3, 3, net.shape[-1], 4],
                                  initializer=tf1.initializers.random_normal(stddev=0.1, seed=1))
        net = tf.nn.relu(tf.nn.conv2d(net, kernel, 1, "SAME", name=name))
    return tf.reduce_mean(net)


@pytest.mark.parametrize("keywords, error, named", [
    ({"keep_fp32_scope": ["conv1"]}, TypeError, "'keep_fp32_scope'. Did you mean 'keep_fp32_scopes'?"),
    ({"deny": ["Softmaxx"]}, ValueError, "'Softmaxx'"),
    ({"deny": "Softmax"}, TypeError, "deny='Softmax' is one string"),
    ({"allow": ["Relu"], "deny": ["Relu"]}, ValueError, "'Relu' is listed as both 'allow' and 'deny'"),
    ({"remove": ["Relu"], "infer": ["Relu"]}, ValueError, "'Relu' is both added to 'infer' and removed"),
    ({"device_type": "TPU"}, ValueError, "device_type='TPU'"),
    ({"placement": "fastest"}, ValueError, "placement='fastest'"),
    ({"include_update_ops": "no"}, TypeError, "include_update_ops='no'"),
])
def test_every_entry_point_rejects_a_bad_option_naming_it(keywords, error, named):
    with tf.Graph().as_default():
        loss = _conv_loss()
        optimizer = tf1.train.GradientDescentOptimizer(0.1)
        calls = {
            "rewrite": lambda: slim_mp.rewrite(loss, "bfloat16", dry_run=True, **keywords),
            # Checked when the optimizer is built, not later when gradients are taken.
            "enable_mixed_precision": lambda: slim_mp.enable_mixed_precision(optimizer, "bfloat16", **keywords),
            "audit": lambda: slim_mp.audit(loss, "bfloat16", None, **keywords),
            "layer_diff": lambda: slim_mp.layer_diff({"loss": loss}, "bfloat16", None, **keywords),
        }
        for caller, call in calls.items():
            with pytest.raises(error, match=named.replace("(", r"\(").replace("?", r"\?")) as raised:
                call()
            if "unknown option" in str(raised.value):
                assert str(raised.value).startswith(f"{caller}() got an unknown option"), caller


def test_options_value_and_keywords_give_the_same_plan_and_keywords_win():
    with tf.Graph().as_default():
        loss = _conv_loss()
        by_keywords = slim_mp.rewrite(loss, "bfloat16", dry_run=True, device_type="CPU", placement="static",
                                      keep_fp32_scopes=["conv2"])
        options = RewriteOptions(device_type="CPU", placement="static", keep_fp32_scopes=("conv2",))
        by_value = slim_mp.rewrite(loss, "bfloat16", dry_run=True, options=options)
        overridden = slim_mp.rewrite(loss, "bfloat16", dry_run=True, options=options, keep_fp32_scopes=[])
    assert by_keywords.ops_converted == by_value.ops_converted
    assert by_keywords.float32_ops == by_value.float32_ops
    # conv2 and what it alone feeds stay float32 under the scope; without it both convs go low.
    assert overridden.ops_converted > by_value.ops_converted >= 1


def test_enable_mixed_precision_passes_its_options_whole_to_the_rewrite():
    with tf.Graph().as_default():
        loss = _conv_loss()
        options = RewriteOptions(device_type="CPU", deny=("Conv2D",))
        optimizer = slim_mp.enable_mixed_precision(tf1.train.GradientDescentOptimizer(0.1), "bfloat16",
                                                   placement="static", options=options)
        with pytest.warns(UserWarning, match="nothing was converted to bfloat16"):
            optimizer.minimize(loss)
        (report,) = optimizer.rewrite_reports
    assert report.ops_converted == 0  # both convolutions denied: nothing goes low
    float32_reasons = set(report.float32_ops)
    assert any("deny" in reason for reason in float32_reasons), float32_reasons


def test_lists_are_stored_as_tuples_so_the_value_stays_unchanged():
    scopes = ["logits"]
    options = RewriteOptions(keep_fp32_scopes=scopes, deny=iter(["Softmax"]))
    scopes.append("conv1")
    assert options.keep_fp32_scopes == ("logits",) and options.deny == ("Softmax",)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.deny = ()


def test_audit_takes_an_options_value_and_ignores_its_placement():
    with tf.Graph().as_default():
        loss = _conv_loss()
        images = tf1.get_default_graph().get_tensor_by_name("images:0")
        with tf1.Session() as session:
            session.run(tf1.global_variables_initializer())
            result = slim_mp.audit(loss, "bfloat16", session, {images: np.ones([1, 8, 8, 3], np.float32)},
                                   steps=1, options=RewriteOptions(placement="measured", keep_fp32_scopes=("conv2",)))
    audited = {row.name for row in result.ops}
    assert any(name.startswith("conv1") for name in audited), audited
    assert not any(name.startswith("conv2") for name in audited), audited


@pytest.mark.parametrize("name, scopes, inside", [
    ("conv1/weights", ["conv1"], True),
    ("conv1/weights", ["conv1/"], True),
    ("conv1", ["conv1"], True),
    ("conv10/weights", ["conv1"], False),
    ("net/conv1/weights", ["conv1"], False),
    ("fc/weights", ["conv1", "fc"], True),
    ("fc/weights", [], False),
])
def test_scope_membership_is_whole_path_components(name, scopes, inside):
    assert slim_mp.graph_pass.in_scopes(name, scopes) is inside


def test_a_keep_fp32_scope_keeps_its_ops_and_not_a_longer_named_neighbour():
    with tf.Graph().as_default():
        loss = _conv_loss()
        report = slim_mp.rewrite(loss, "bfloat16", dry_run=True, device_type="CPU", placement="static",
                                 keep_fp32_scopes=["conv/", "conv1/"])
    kept = [name for reason, names in report.float32_ops.items() if "keep-float32 scope 'conv1/'" in reason
            for name in names]
    assert "conv1" in kept and not any(name.startswith("conv2") for name in kept), report.float32_ops
