"""ResNet building blocks shared by ``resnet_v1`` and ``resnet_v2`` (official module ``nets.resnet_utils``).

A ResNet is a list of :class:`Block` descriptions stacked by :func:`stack_blocks_dense`, which also
controls the output density: past the requested ``output_stride`` the remaining strides become
atrous rates, so the features stay at that resolution with the same receptive field. Each block
subsamples in its last unit (not its first), which gives the same result with less memory.
"""

import collections
from typing import Callable, Optional, Sequence

import tensorflow as tf
import tf_slim as slim


class Block(collections.namedtuple("Block", ["scope", "unit_fn", "args"])):
    """One ResNet block: its variable ``scope``, the ``unit_fn`` building a unit, and ``args``,
    one dict of keyword arguments (``depth``, ``depth_bottleneck``, ``stride``, ...) per unit."""


def subsample(inputs: tf.Tensor, factor: int, scope: Optional[str] = None) -> tf.Tensor:
    """Keep every ``factor``-th row and column of ``inputs`` [batch, height, width, channels].

    Returns ``inputs`` itself when ``factor`` is 1.
    """
    if factor == 1:
        return inputs
    return slim.max_pool2d(inputs, [1, 1], stride=factor, scope=scope)


def conv2d_same(
    inputs: tf.Tensor,
    num_outputs: int,
    kernel_size: int,
    stride: int,
    rate: int = 1,
    scope: Optional[str] = None,
) -> tf.Tensor:
    """A 'SAME' convolution whose strided output equals the stride-1 output subsampled by ``stride``.

    TF's own strided 'SAME' padding is asymmetric for even input sizes, which misaligns the
    features; with ``stride > 1`` the input is padded explicitly and convolved 'VALID' instead.

    Args:
        inputs: [batch, height, width, channels].
        num_outputs: number of filters.
        kernel_size: side of the square kernel.
        stride: output stride.
        rate: atrous rate.
        scope: variable scope of the convolution.

    Returns:
        The [batch, height_out, width_out, num_outputs] convolution output.
    """
    if stride == 1:
        return slim.conv2d(inputs, num_outputs, kernel_size, stride=1, rate=rate, padding="SAME", scope=scope)
    dilated_kernel = kernel_size + (kernel_size - 1) * (rate - 1)
    before = (dilated_kernel - 1) // 2
    after = dilated_kernel - 1 - before
    padded = tf.pad(inputs, [[0, 0], [before, after], [before, after], [0, 0]])
    return slim.conv2d(padded, num_outputs, kernel_size, stride=stride, rate=rate, padding="VALID", scope=scope)


def _unreachable(output_stride: int) -> ValueError:
    return ValueError(f"The target output_stride cannot be reached: {output_stride} is not a product of the "
                      "leading unit strides of the blocks.")


@slim.add_arg_scope
def stack_blocks_dense(
    net: tf.Tensor,
    blocks: Sequence[Block],
    output_stride: Optional[int] = None,
    store_non_strided_activations: bool = False,
    outputs_collections: Optional[str] = None,
) -> tf.Tensor:
    """Build ``blocks`` on ``net`` in scopes ``<block.scope>/unit_<i>``, at the requested output density.

    Args:
        net: [batch, height, width, channels].
        blocks: the :class:`Block` descriptions, in order.
        output_stride: ratio of input to output resolution; ``None`` keeps the nominal stride (the
            product of all unit strides). Otherwise it must be a product of the leading unit
            strides: once reached, later strides are applied as atrous rates instead.
        store_non_strided_activations: move each block's last stride to after the block, so the
            block's output collected in ``outputs_collections`` is the full-resolution one
            (the final output is the same; the last unit of each block costs 4x more).
        outputs_collections: collection receiving each block's output under the block's scope name.

    Returns:
        The output of the last block.

    Raises:
        ValueError: if ``output_stride`` cannot be reached.
    """
    current_stride = 1
    rate = 1
    for block in blocks:
        with tf.compat.v1.variable_scope(block.scope, "block", [net]) as block_scope:
            deferred_stride = 1
            for index, unit in enumerate(block.args):
                if store_non_strided_activations and index == len(block.args) - 1:
                    deferred_stride = unit.get("stride", 1)
                    unit = dict(unit, stride=1)
                unit_stride = unit.get("stride", 1)
                with tf.compat.v1.variable_scope(f"unit_{index + 1}", values=[net]):
                    if output_stride is not None and current_stride == output_stride:
                        net = block.unit_fn(net, rate=rate, **dict(unit, stride=1))
                        rate *= unit_stride
                    else:
                        net = block.unit_fn(net, rate=1, **unit)
                        current_stride *= unit_stride
                        if output_stride is not None and current_stride > output_stride:
                            raise _unreachable(output_stride)
            net = slim.utils.collect_named_outputs(outputs_collections, block_scope.name, net)
            if output_stride is not None and current_stride == output_stride:
                rate *= deferred_stride
            else:
                net = subsample(net, deferred_stride)
                current_stride *= deferred_stride
                if output_stride is not None and current_stride > output_stride:
                    raise _unreachable(output_stride)
    if output_stride is not None and current_stride != output_stride:
        raise _unreachable(output_stride)
    return net


def resnet_arg_scope(
    weight_decay: float = 0.0001,
    batch_norm_decay: float = 0.997,
    batch_norm_epsilon: float = 1e-5,
    batch_norm_scale: bool = True,
    activation_fn: Callable = tf.nn.relu,
    use_batch_norm: bool = True,
    batch_norm_updates_collections: str = tf.compat.v1.GraphKeys.UPDATE_OPS,
) -> dict:
    """The official ResNet defaults: L2-decayed, variance-scaled convolutions followed by batch norm.

    Args:
        weight_decay: L2 coefficient of the convolution weights.
        batch_norm_decay: moving-average decay of the batch-norm statistics.
        batch_norm_epsilon: batch-norm variance epsilon.
        batch_norm_scale: whether batch norm learns a ``gamma``.
        activation_fn: activation after each convolution.
        use_batch_norm: whether convolutions are batch-normalised.
        batch_norm_updates_collections: collection of the moving-average update ops.

    Returns:
        The arg_scope, with 'SAME' max pooling (aligned features for dense prediction).
    """
    batch_norm_params = {
        "decay": batch_norm_decay,
        "epsilon": batch_norm_epsilon,
        "scale": batch_norm_scale,
        "updates_collections": batch_norm_updates_collections,
        "fused": None,
    }
    with slim.arg_scope(
        [slim.conv2d],
        weights_regularizer=slim.l2_regularizer(weight_decay),
        weights_initializer=slim.variance_scaling_initializer(),
        activation_fn=activation_fn,
        normalizer_fn=slim.batch_norm if use_batch_norm else None,
        normalizer_params=batch_norm_params,
    ), slim.arg_scope([slim.batch_norm], **batch_norm_params), slim.arg_scope(
        [slim.max_pool2d], padding="SAME"
    ) as scope:
        return scope
