"""ResNet-18 and ResNet-34 (He et al. 2016, Table 1): ResNet v1 built from basic residual units.

Official TF-Slim ships only the bottleneck ResNets (50 layers and up). These two
follow the same slim layout as ``tf_slim.nets.resnet_v1`` so that the factory,
the arg_scope and the end points work alike: scope ``resnet_v1_18`` /
``resnet_v1_34``, blocks ``block1..block4`` of units ``unit_N``, each unit a
``basic_block`` with ``conv1``, ``conv2`` and (where the depth changes) a
``shortcut`` projection, the block stride carried by the block's last unit,
and a 1x1 convolution named ``logits`` as classifier.
"""

import numbers
from typing import Optional, Sequence

import tensorflow as tf
import tf_slim as slim
from tf_slim.nets import resnet_utils

resnet_arg_scope = resnet_utils.resnet_arg_scope

STAGE_DEPTHS = (64, 128, 256, 512)
STAGE_STRIDES = (2, 2, 2, 1)
UNITS_PER_STAGE = {
    "resnet_v1_18": (2, 2, 2, 2),
    "resnet_v1_34": (3, 4, 6, 3),
}
ROOT_DEPTH = 64
ROOT_STRIDE = 4  # conv1 (stride 2) followed by pool1 (stride 2).


def _shortcut(inputs: tf.Tensor, depth: int, stride: int) -> tf.Tensor:
    """Identity (subsampled by ``stride``) when the depth is kept, else a 1x1 projection with BN."""
    depth_in = slim.utils.last_dimension(inputs.get_shape(), min_rank=4)
    if depth_in == depth:
        return resnet_utils.subsample(inputs, stride, "shortcut")
    return slim.conv2d(inputs, depth, [1, 1], stride=stride, activation_fn=None, scope="shortcut")


@slim.add_arg_scope
def basic_block(
    inputs: tf.Tensor,
    depth: int,
    stride: int,
    rate: int = 1,
    outputs_collections: Optional[str] = None,
    scope: Optional[str] = None,
) -> tf.Tensor:
    """Basic residual unit, ``relu(shortcut(x) + conv2(conv1(x)))``, with BN after each convolution.

    ``conv1`` (3x3) carries the stride, ``conv2`` (3x3) has no activation before
    the sum; ``rate`` dilates both for ``output_stride`` control.
    """
    with tf.compat.v1.variable_scope(scope, "basic_block", [inputs]) as unit_scope:
        shortcut = _shortcut(inputs, depth, stride)
        residual = resnet_utils.conv2d_same(inputs, depth, 3, stride, rate=rate, scope="conv1")
        residual = slim.conv2d(residual, depth, [3, 3], rate=rate, activation_fn=None, scope="conv2")
        output = tf.nn.relu(shortcut + residual)
        return slim.utils.collect_named_outputs(outputs_collections, unit_scope.name, output)


def basic_stage(scope: str, depth: int, num_units: int, stride: int) -> resnet_utils.Block:
    """A block of ``num_units`` basic units of ``depth`` channels; only the last unit is strided."""
    units = [{"depth": depth, "stride": 1}] * (num_units - 1) + [{"depth": depth, "stride": stride}]
    return resnet_utils.Block(scope, basic_block, units)


def _check_arguments(inputs: tf.Tensor, num_classes: Optional[int], output_stride: Optional[int]) -> None:
    """Reject inputs the network cannot be built for, with a message that says what to change."""
    if inputs.get_shape().rank != 4:
        raise ValueError(
            f"inputs must be a 4-D [batch, height, width, channels] tensor, got shape {inputs.get_shape()}; "
            "add the missing batch or channel dimension."
        )
    if num_classes is not None and (not isinstance(num_classes, numbers.Integral) or num_classes < 0):
        raise ValueError(f"num_classes must be a non-negative int or None, got {num_classes!r}.")
    if output_stride is not None and (output_stride <= 0 or output_stride % ROOT_STRIDE != 0):
        raise ValueError(
            f"output_stride must be a positive multiple of {ROOT_STRIDE} (or None), got {output_stride!r}."
        )


def resnet_v1_basic(
    inputs: tf.Tensor,
    blocks: Sequence[resnet_utils.Block],
    num_classes: Optional[int],
    is_training: bool,
    global_pool: bool,
    output_stride: Optional[int],
    spatial_squeeze: bool,
    reuse: Optional[bool],
    scope: str,
) -> tuple[tf.Tensor, dict]:
    """Build a ResNet v1 trunk (7x7 conv, 3x3 max pool, ``blocks``) and its 1x1-conv classifier.

    Returns ``(logits, end_points)``; with ``num_classes`` 0 or None, the
    (globally pooled, if ``global_pool``) features instead of logits.
    """
    _check_arguments(inputs, num_classes, output_stride)
    with tf.compat.v1.variable_scope(scope, "resnet_v1", [inputs], reuse=reuse) as net_scope:
        collection = net_scope.original_name_scope + "_end_points"
        with slim.arg_scope(
            [slim.conv2d, basic_block, resnet_utils.stack_blocks_dense], outputs_collections=collection
        ), slim.arg_scope([slim.batch_norm], is_training=is_training):
            net = resnet_utils.conv2d_same(inputs, ROOT_DEPTH, 7, stride=2, scope="conv1")
            net = slim.max_pool2d(net, [3, 3], stride=2, scope="pool1")
            block_output_stride = None if output_stride is None else output_stride // ROOT_STRIDE
            net = resnet_utils.stack_blocks_dense(net, blocks, block_output_stride)
            end_points = slim.utils.convert_collection_to_dict(collection)
            if global_pool:
                net = tf.reduce_mean(net, [1, 2], keepdims=True, name="pool5")
                end_points["global_pool"] = net
            if not num_classes:
                return net, end_points
            logits = slim.conv2d(net, num_classes, [1, 1], activation_fn=None, normalizer_fn=None, scope="logits")
            end_points[net_scope.name + "/logits"] = logits
            if spatial_squeeze:
                logits = tf.squeeze(logits, [1, 2], name="SpatialSqueeze")
                end_points[net_scope.name + "/spatial_squeeze"] = logits
            predictions = slim.softmax(logits, scope="predictions")
            end_points["predictions"] = predictions
            end_points["Predictions"] = predictions
            return logits, end_points


def stage_blocks(units_per_stage: Sequence[int]) -> list[resnet_utils.Block]:
    """The four blocks ``block1..block4`` with ``units_per_stage`` basic units each (paper, Table 1)."""
    return [
        basic_stage(f"block{index + 1}", depth, num_units, stride)
        for index, (depth, num_units, stride) in enumerate(zip(STAGE_DEPTHS, units_per_stage, STAGE_STRIDES))
    ]


def resnet_v1_18(
    inputs: tf.Tensor,
    num_classes: Optional[int] = 1000,
    is_training: bool = True,
    global_pool: bool = True,
    output_stride: Optional[int] = None,
    spatial_squeeze: bool = True,
    reuse: Optional[bool] = None,
    scope: str = "resnet_v1_18",
) -> tuple[tf.Tensor, dict]:
    """ResNet-18: basic units [2, 2, 2, 2] of depths 64/128/256/512. Returns ``(logits, end_points)``."""
    blocks = stage_blocks(UNITS_PER_STAGE["resnet_v1_18"])
    return resnet_v1_basic(
        inputs, blocks, num_classes, is_training, global_pool, output_stride, spatial_squeeze, reuse, scope
    )


def resnet_v1_34(
    inputs: tf.Tensor,
    num_classes: Optional[int] = 1000,
    is_training: bool = True,
    global_pool: bool = True,
    output_stride: Optional[int] = None,
    spatial_squeeze: bool = True,
    reuse: Optional[bool] = None,
    scope: str = "resnet_v1_34",
) -> tuple[tf.Tensor, dict]:
    """ResNet-34: basic units [3, 4, 6, 3] of depths 64/128/256/512. Returns ``(logits, end_points)``."""
    blocks = stage_blocks(UNITS_PER_STAGE["resnet_v1_34"])
    return resnet_v1_basic(
        inputs, blocks, num_classes, is_training, global_pool, output_stride, spatial_squeeze, reuse, scope
    )


resnet_v1_18.default_image_size = 224
resnet_v1_34.default_image_size = 224
