"""The standalone copy of a region (``region_copy``): faithful and complete, or refused with the reason.

Nothing here depends on this machine's speed: the tests check what the copies contain.
"""

import pytest
import tensorflow as tf

from slim_mp.graph_pass.placement.region_copy import copy_region
from slim_mp.graph_pass.region import select_region

from .fakes import FakeMeasure, refuse_steps, measured_rewrite, CLOSE_CALL, conv_then_while_loop, small_net, copy_of

tf1 = tf.compat.v1


def test_copy_replaces_inputs_and_variable_reads_and_marks_the_trainable_ones():
    graph, loss, _ = small_net()
    ops_before = len(graph.get_operations())
    copy = copy_of(graph, loss)
    assert len(graph.get_operations()) == ops_before, "copying must not touch the user's graph"
    by_source = {s.tensor_name.split(":")[0]: s for s in copy.substitutes}
    assert by_source["images"].shape == (4, 8, 8, 3) and not by_source["images"].trainable
    assert by_source["labels"].dtype == tf.int64
    trainable = {s.tensor_name for s in copy.substitutes if s.trainable}
    with graph.as_default():
        names = {v.op.name for v in tf1.trainable_variables()}
    read_variables = {graph.get_tensor_by_name(name).op.inputs[0].op.name for name in trainable}
    assert read_variables == names and len(names) == 4  # conv weights, batch-norm beta, fc weights and biases
    reads = [graph.get_tensor_by_name(s.tensor_name).op for s in copy.substitutes]
    moving = [s for s, read in zip(copy.substitutes, reads) if read.inputs and "moving_" in read.inputs[0].op.name]
    assert moving and not any(s.trainable for s in moving), "batch-norm statistics are read, never trained"
    assert not any(node.op.startswith("Assign") for node in copy.graph_def.node), "variable updates stay out"
    assert any(node.op == "RandomUniform" for node in copy.graph_def.node), "dropout's random numbers stay in"


def test_copy_digest_is_stable_and_tells_graphs_apart():
    first, second, other = small_net(), small_net(), small_net(dropout=False)
    assert copy_of(*first[:2]).digest() == copy_of(*second[:2]).digest()
    assert copy_of(*first[:2]).digest() != copy_of(*other[:2]).digest()


def test_region_inside_a_while_loop_cannot_be_copied():
    graph = tf.Graph()
    with graph.as_default():
        images = tf1.placeholder(tf.float32, [2, 4])
        _, result = tf.while_loop(lambda i, x: i < 2, lambda i, x: (i + 1, tf.matmul(x, tf.ones([4, 4]))),
                                  [0, images])
        loss = tf.reduce_mean(result)
        region = select_region(loss)
    with pytest.raises(ValueError, match="inside control flow or a function"):
        copy_region(region, [loss])


def test_input_without_a_static_shape_cannot_be_copied():
    graph = tf.Graph()
    with graph.as_default():
        images = tf1.placeholder(tf.float32, [None, 4], name="images")
        loss = tf.reduce_mean(tf.matmul(images, tf.ones([4, 4])))
        region = select_region(loss)
    with pytest.raises(ValueError, match="images:0 has no static shape"):
        copy_region(region, [loss])


def test_a_region_that_cannot_be_copied_falls_back_to_the_estimate_with_a_warning(tmp_path):
    with pytest.warns(UserWarning, match="cannot time whole steps"):
        report = measured_rewrite(conv_then_while_loop(), tmp_path, FakeMeasure(CLOSE_CALL), measure_steps=refuse_steps)
    assert set(report.placement.float32_ops) == {"conv0", "conv1"}, "the +20% estimate decides"


def _batched_net(batch: int, reshape_to_batch: bool, constant_images: bool):
    """A conv net over a batch of images (a placeholder, or a constant as a benchmark feeds) and labels."""
    graph = tf.Graph()
    with graph.as_default():
        images = (tf.constant(0.5, shape=[batch, 16, 16, 3]) if constant_images
                  else tf.compat.v1.placeholder(tf.float32, [batch, 16, 16, 3]))
        labels = tf.compat.v1.placeholder(tf.int64, [batch])
        weights = tf.compat.v1.get_variable("w", [3, 3, 3, 4])
        net = tf.nn.relu(tf.nn.conv2d(images, weights, 1, "SAME"))
        logits = tf.reshape(net, [batch, -1]) if reshape_to_batch else tf.reshape(net, [-1, 16 * 16 * 4])
        loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    return graph, loss


@pytest.mark.parametrize("constant_images", [False, True], ids=["placeholder", "constant images"])
def test_a_large_batch_is_timed_on_fewer_examples_when_the_graph_builds_so(constant_images):
    from slim_mp.graph_pass.placement.region_copy import smaller_for_timing

    graph, loss = _batched_net(32, reshape_to_batch=False, constant_images=constant_images)
    with graph.as_default():
        copy = copy_region(select_region(loss), [loss])
    assert copy.batch() == 32
    smaller = smaller_for_timing(copy, 8)
    inputs = {s.shape for s in smaller.substitutes if s.is_input}
    assert inputs == {(8, 16, 16, 3), (8,)} and smaller.full_batch == 32 and smaller.batch() == 8
    assert {s.shape for s in smaller.substitutes if not s.is_input} == {(3, 3, 3, 4)}, "the weights keep theirs"
    assert smaller.digest() != copy.digest()
    assert smaller_for_timing(copy, 32) is copy, "a batch that fits is timed as it is"


def test_shape_constants_that_start_with_the_batch_are_cut_down_with_it():
    from slim_mp.graph_pass.placement.region_copy import smaller_for_timing

    graph, loss = _batched_net(32, reshape_to_batch=True, constant_images=True)
    with graph.as_default():
        copy = copy_region(select_region(loss), [loss])
    smaller = smaller_for_timing(copy, 8)
    assert smaller.full_batch == 32
    shapes = {node.name: list(tf.make_ndarray(node.attr["value"].tensor)) for node in smaller.graph_def.node
              if node.op == "Const" and node.name.endswith("Reshape/shape")}
    assert list(shapes.values()) == [[8, -1]]


def test_a_graph_that_needs_its_batch_elsewhere_is_timed_at_its_own_batch():
    from slim_mp.graph_pass.placement.region_copy import smaller_for_timing

    graph = tf.Graph()
    with graph.as_default():
        images = tf.compat.v1.placeholder(tf.float32, [32, 8, 8, 3])
        per_example = tf.compat.v1.get_variable("per_example", [32, 1, 1, 1])  # a weight for each of 32 examples
        net = tf.nn.conv2d(images * per_example, tf.compat.v1.get_variable("w", [3, 3, 3, 4]), 1, "SAME")
        loss = tf.reduce_mean(net)
        copy = copy_region(select_region(loss), [loss])
    assert copy.batch() == 32 and smaller_for_timing(copy, 8) is copy
