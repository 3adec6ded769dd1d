"""Shared machinery of MobileNet v2, v3 and EdgeTPU: layer tables, depth rounding, blocks, head, arg scope.

Each network is a table of layers (``ConvLayer``, ``InvertedResidual``,
``GlobalPool``); ``network_function`` turns a table into a slim network
function with the official scopes (``Conv``, ``Conv_1``, ``expanded_conv``,
``expanded_conv_1``, ..., ``Logits/Conv2d_1c_1x1``), so the official
checkpoints restore. ``nets/mobilenet_v2.py`` and ``nets/mobilenet_v3.py``
hold only their tables.
"""

import dataclasses
import numbers
from typing import Callable, Dict, Optional, Sequence, Tuple, Union

import tensorflow as tf
import tf_slim as slim

EndPoints = Dict[str, tf.Tensor]
Activation = Callable[[tf.Tensor], tf.Tensor]
NetworkFn = Callable[..., Tuple[tf.Tensor, EndPoints]]

DEFAULT_IMAGE_SIZE = 224
SQUEEZE_FACTOR = 4
ROUNDING_TOLERANCE = 0.9
# The official MobileNet v3 squeeze-excite gate multiplies by this literal, not by exactly 1/6 (its
# hard-swish does use 1/6). The pretrained checkpoints were trained with it, so the gate keeps it.
SQUEEZE_EXCITE_GATE_SCALE = 0.16667


def hard_sigmoid(inputs: tf.Tensor, scale: float = 1.0 / 6.0) -> tf.Tensor:
    """``relu6(x + 3) * scale``: the piecewise-linear sigmoid of MobileNet v3, cheaper than the exponential one."""
    return tf.nn.relu6(inputs + 3.0) * scale


def squeeze_excite_gate(inputs: tf.Tensor) -> tf.Tensor:
    """The official squeeze-excite gate, ``relu6(x + 3) * 0.16667``, so the v3 checkpoints give their logits."""
    return hard_sigmoid(inputs, SQUEEZE_EXCITE_GATE_SCALE)


def hard_swish(inputs: tf.Tensor) -> tf.Tensor:
    """``x * relu6(x + 3) * (1/6)``, the MobileNet v3 replacement for swish.

    Multiplied in the official order (``x * relu6`` first, then 1/6), so float32 rounding matches it too.
    """
    return inputs * tf.nn.relu6(inputs + 3.0) * (1.0 / 6.0)


def make_divisible(value: float, divisor: int = 8, min_value: Optional[int] = None) -> int:
    """Round ``value`` to the nearest multiple of ``divisor`` (at least ``min_value``), losing at most 10%.

    This is the official MobileNet rounding of layer depths, so scaled networks
    get exactly the official channel counts.
    """
    floor = divisor if min_value is None else min_value
    rounded = max(floor, int(value + divisor / 2) // divisor * divisor)
    if rounded < ROUNDING_TOLERANCE * value:
        rounded += divisor
    return rounded


@dataclasses.dataclass(frozen=True)
class ConvLayer:
    """A plain convolution (scopes ``Conv``, ``Conv_1``, ...); without batch norm it has biases."""

    num_outputs: int
    activation: Activation
    kernel_size: int = 1
    stride: int = 1
    batch_norm: bool = True


@dataclasses.dataclass(frozen=True)
class InvertedResidual:
    """An inverted-residual block (scopes ``expanded_conv``, ``expanded_conv_1``, ...).

    1x1 ``expand`` to ``expansion`` times the input depth (skipped when that is
    no wider than the input), ``depthwise`` ``kernel_size`` convolution, optional
    ``squeeze_excite``, linear 1x1 ``project``, and a residual sum when shapes
    allow. A ``fused`` block (EdgeTPU) replaces expand + depthwise by one full
    ``kernel_size`` convolution in ``expand``.
    """

    num_outputs: int
    activation: Activation
    expansion: float = 6.0
    kernel_size: int = 3
    stride: int = 1
    squeeze_excite: bool = False
    fused: bool = False
    residual: bool = True


@dataclasses.dataclass(frozen=True)
class GlobalPool:
    """Average the feature map to 1x1 inside the body (MobileNet v3, before its last convolution)."""


Layer = Union[ConvLayer, InvertedResidual, GlobalPool]


@dataclasses.dataclass(frozen=True)
class DepthRule:
    """How ``depth_multiplier`` scales the depth of every layer of the table."""

    multiplier: float = 1.0
    min_depth: int = 8
    divisible_by: int = 8

    def scale(self, depth: int) -> int:
        """The depth of a layer whose unscaled table depth is ``depth``."""
        return make_divisible(depth * self.multiplier, self.divisible_by, self.min_depth)


def _numbered(base: str, index: int) -> str:
    """Slim's naming of repeated scopes: ``base``, ``base_1``, ``base_2``, ..."""
    return base if index == 0 else f"{base}_{index}"


def _global_average(inputs: tf.Tensor, name: str) -> tf.Tensor:
    """Mean over height and width, keeping them as 1x1 (works for any input size)."""
    return tf.reduce_mean(inputs, axis=[1, 2], keepdims=True, name=name)


def squeeze_excite(inputs: tf.Tensor, squeeze_factor: int = SQUEEZE_FACTOR, divisible_by: int = 8) -> tf.Tensor:
    """Reweight the channels of ``inputs`` by a gate computed from their global average (scope ``squeeze_excite``).

    The gate is two 1x1 convolutions with biases: ReLU down to depth/``squeeze_factor``
    (rounded with ``make_divisible``), then ``squeeze_excite_gate`` back to the input depth.
    """
    depth = inputs.shape.as_list()[-1]
    with tf.compat.v1.variable_scope("squeeze_excite"):
        pooled = _global_average(inputs, name="pool")
        squeezed = slim.conv2d(
            pooled,
            make_divisible(depth / squeeze_factor, divisible_by),
            [1, 1],
            activation_fn=tf.nn.relu,
            normalizer_fn=None,
            scope="Conv",
        )
        gate = slim.conv2d(
            squeezed, depth, [1, 1], activation_fn=squeeze_excite_gate, normalizer_fn=None, scope="Conv_1"
        )
        return inputs * gate


def inverted_residual(
    inputs: tf.Tensor, num_outputs: int, block: InvertedResidual, scope: str
) -> Tuple[tf.Tensor, EndPoints]:
    """Build ``block`` with ``num_outputs`` output channels; return the output and its inner end points.

    The inner end points are ``expansion_output``, ``depthwise_output`` (each
    when that layer exists) and ``output``.
    """
    input_depth = inputs.shape.as_list()[-1]
    expanded_depth = make_divisible(input_depth * block.expansion)
    expands = expanded_depth > input_depth
    if block.fused and not expands and block.stride != 1:
        raise ValueError(
            f"stride={block.stride} cannot be applied by a fused block without expansion (scope {scope}); "
            "use stride=1 or an expansion wider than the input."
        )
    taps: EndPoints = {}
    with tf.compat.v1.variable_scope(scope):
        net = inputs
        if expands:
            kernel_size, stride = (block.kernel_size, block.stride) if block.fused else (1, 1)
            net = slim.conv2d(
                net,
                expanded_depth,
                [kernel_size, kernel_size],
                stride=stride,
                activation_fn=block.activation,
                normalizer_fn=slim.batch_norm,
                scope="expand",
            )
            taps["expansion_output"] = net
        if not block.fused:
            net = slim.separable_conv2d(
                net,
                None,
                [block.kernel_size, block.kernel_size],
                depth_multiplier=1,
                stride=block.stride,
                activation_fn=block.activation,
                normalizer_fn=slim.batch_norm,
                scope="depthwise",
            )
            taps["depthwise_output"] = net
        if block.squeeze_excite:
            net = squeeze_excite(net)
        net = slim.conv2d(net, num_outputs, [1, 1], activation_fn=None, normalizer_fn=slim.batch_norm, scope="project")
        if block.residual and block.stride == 1 and num_outputs == input_depth:
            net = net + inputs
        taps["output"] = tf.identity(net, name="output")
    return taps["output"], taps


def mobilenet_body(
    inputs: tf.Tensor, layers: Sequence[Layer], depth_rule: DepthRule, keep_last_depth: bool
) -> Tuple[tf.Tensor, EndPoints]:
    """Build the layer table on ``inputs``; end points are ``layer_<n>`` (1-based) and ``layer_<n>/<inner>``.

    ``keep_last_depth`` leaves the final layer at its table depth whatever the
    multiplier (the official ``finegrain_classification_mode``).
    """
    end_points: EndPoints = {}
    conv_count = 0
    block_count = 0
    net = inputs
    for index, layer in enumerate(layers):
        name = f"layer_{index + 1}"
        if isinstance(layer, GlobalPool):
            net = _global_average(net, name=name)
        else:
            is_last = index == len(layers) - 1
            depth = layer.num_outputs if is_last and keep_last_depth else depth_rule.scale(layer.num_outputs)
            if isinstance(layer, ConvLayer):
                net = slim.conv2d(
                    net,
                    depth,
                    [layer.kernel_size, layer.kernel_size],
                    stride=layer.stride,
                    activation_fn=layer.activation,
                    normalizer_fn=slim.batch_norm if layer.batch_norm else None,
                    scope=_numbered("Conv", conv_count),
                )
                conv_count += 1
            else:
                net, taps = inverted_residual(net, depth, layer, _numbered("expanded_conv", block_count))
                block_count += 1
                end_points.update({f"{name}/{tap}": tensor for tap, tensor in taps.items()})
        end_points[name] = net
    return net, end_points


def classification_head(
    features: tf.Tensor,
    num_classes: Optional[int],
    dropout_keep_prob: Optional[float],
    spatial_squeeze: bool,
    end_points: EndPoints,
) -> tf.Tensor:
    """Global pool, dropout and the 1x1 ``Logits/Conv2d_1c_1x1`` classifier; adds ``global_pool`` and ``Logits``.

    Returns the pooled [batch, 1, 1, depth] features when ``num_classes`` is 0 or None.
    """
    with tf.compat.v1.variable_scope("Logits"):
        net = _global_average(features, name="global_pool")
        end_points["global_pool"] = net
        if not num_classes:
            return net
        dropout_args = {} if dropout_keep_prob is None else {"keep_prob": dropout_keep_prob}
        net = slim.dropout(net, scope="Dropout", **dropout_args)
        logits = slim.conv2d(
            net,
            num_classes,
            [1, 1],
            activation_fn=None,
            normalizer_fn=None,
            biases_initializer=tf.compat.v1.zeros_initializer(),
            scope="Conv2d_1c_1x1",
        )
        if spatial_squeeze:
            logits = tf.squeeze(logits, [1, 2])
        logits = tf.identity(logits, name="output")
    end_points["Logits"] = logits
    return logits


def _check_arguments(inputs: tf.Tensor, num_classes: Optional[int], depth_rule: DepthRule) -> None:
    """Reject inputs and settings the network cannot be built from."""
    if inputs.shape.rank != 4 or inputs.shape.as_list()[-1] is None:
        raise ValueError(
            f"inputs has shape {inputs.shape}; pass a 4-D [batch, height, width, channels] tensor "
            "with a known channel count."
        )
    if num_classes is not None and (not isinstance(num_classes, numbers.Integral) or num_classes < 0):
        raise ValueError(f"num_classes={num_classes!r} is invalid; pass a class count >= 1, or 0/None for features.")
    if depth_rule.multiplier <= 0:
        raise ValueError(f"depth_multiplier={depth_rule.multiplier} is invalid; pass a positive value such as 1.0.")
    if depth_rule.min_depth <= 0 or depth_rule.divisible_by <= 0:
        raise ValueError(
            f"min_depth={depth_rule.min_depth} / divisible_by={depth_rule.divisible_by} is invalid; "
            "pass positive integers (the official value of both is 8)."
        )


def network_function(
    name: str,
    layers: Sequence[Layer],
    default_scope: str,
    default_depth_multiplier: float = 1.0,
    default_finegrain: bool = False,
) -> NetworkFn:
    """Make the slim network function ``name`` for the table ``layers``, with its official defaults.

    The function has the zoo signature ``fn(inputs, num_classes=1001,
    is_training=True, dropout_keep_prob=None, spatial_squeeze=True, reuse=None,
    scope=..., depth_multiplier=..., finegrain_classification_mode=...,
    min_depth=8, divisible_by=8) -> (logits, end_points)``.
    """
    layers = tuple(layers)

    def network(
        inputs: tf.Tensor,
        num_classes: Optional[int] = 1001,
        is_training: bool = True,
        dropout_keep_prob: Optional[float] = None,
        spatial_squeeze: bool = True,
        reuse: Optional[bool] = None,
        scope: str = default_scope,
        depth_multiplier: float = default_depth_multiplier,
        finegrain_classification_mode: bool = default_finegrain,
        min_depth: int = 8,
        divisible_by: int = 8,
    ) -> Tuple[tf.Tensor, EndPoints]:
        depth_rule = DepthRule(depth_multiplier, min_depth, divisible_by)
        _check_arguments(inputs, num_classes, depth_rule)
        keep_last_depth = finegrain_classification_mode and depth_multiplier < 1
        with tf.compat.v1.variable_scope(scope, default_scope, [inputs], reuse=reuse):
            with slim.arg_scope([slim.batch_norm], center=True, scale=True), slim.arg_scope(
                [slim.batch_norm, slim.dropout], is_training=is_training
            ):
                features, end_points = mobilenet_body(inputs, layers, depth_rule, keep_last_depth)
                logits = classification_head(features, num_classes, dropout_keep_prob, spatial_squeeze, end_points)
                if num_classes:
                    end_points["Predictions"] = slim.softmax(logits, scope="Predictions")
        return logits, end_points

    network.__name__ = name
    network.__qualname__ = name
    network.__doc__ = (
        f"Build {name} on ``inputs`` [batch, height, width, 3]; return ``(logits, end_points)``.\n\n"
        "``dropout_keep_prob`` None takes the keep probability of the enclosing arg scope\n"
        "(``mobilenet_arg_scope`` sets the official 0.8). ``depth_multiplier`` scales every\n"
        "layer's depth (rounded to ``divisible_by``, at least ``min_depth``);\n"
        "``finegrain_classification_mode`` keeps the last layer unscaled when the multiplier\n"
        "is below 1. With ``num_classes`` 0 or None the pooled features are returned.\n"
    )
    network.default_image_size = DEFAULT_IMAGE_SIZE
    return network


def mobilenet_arg_scope(
    is_training: bool = True,
    weight_decay: float = 0.00004,
    stddev: float = 0.09,
    dropout_keep_prob: float = 0.8,
    bn_decay: float = 0.997,
) -> dict:
    """The official MobileNet v2/v3 training arg scope (also used for EdgeTPU).

    Truncated-normal weights (``stddev`` < 0 selects Xavier), L2 decay on
    regular convolutions only (not on depthwise kernels), batch-norm decay
    ``bn_decay`` and dropout keep probability ``dropout_keep_prob``.
    ``is_training`` only affects layers built outside the network functions,
    which set batch norm and dropout from their own ``is_training``.
    """
    if stddev < 0:
        initializer = slim.initializers.xavier_initializer()
    else:
        initializer = tf.compat.v1.truncated_normal_initializer(stddev=stddev)
    weighted_layers = [slim.conv2d, slim.fully_connected, slim.separable_conv2d]
    with slim.arg_scope(weighted_layers, weights_initializer=initializer):
        with slim.arg_scope([slim.batch_norm], decay=bn_decay, is_training=is_training):
            with slim.arg_scope([slim.dropout], keep_prob=dropout_keep_prob, is_training=is_training):
                with slim.arg_scope([slim.conv2d], weights_regularizer=slim.l2_regularizer(weight_decay)):
                    with slim.arg_scope([slim.separable_conv2d], weights_regularizer=None) as scope:
                        return scope
