"""MobileNet v1 (Howard et al., 2017) with the official ``MobilenetV1`` scopes and its width variants.

The body is one 3x3 convolution followed by 13 depthwise-separable blocks
(depthwise 3x3 + pointwise 1x1, each with batch norm and ReLU6). The width
variants scale every layer's depth by ``depth_multiplier`` (never below
``min_depth``), which is how the official 0.75/0.5/0.25 checkpoints were made.
"""

import collections
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import tensorflow as tf
import tf_slim as slim

from nets._impl.mobilenet_layers import fixed_padding, wrapped_partial

EndPoints = Dict[str, tf.Tensor]

# A plain convolution layer of the body (only the stem uses it).
Conv = collections.namedtuple("Conv", ["kernel", "stride", "depth"])
# A depthwise convolution followed by a 1x1 pointwise convolution to ``depth`` channels.
DepthSepConv = collections.namedtuple("DepthSepConv", ["kernel", "stride", "depth"])

ConvDef = Union[Conv, DepthSepConv]

# The official body, a list so that users can copy and edit it (and pass it as ``conv_defs``).
MOBILENETV1_CONV_DEFS: List[ConvDef] = [
    Conv(kernel=[3, 3], stride=2, depth=32),
    DepthSepConv(kernel=[3, 3], stride=1, depth=64),
    DepthSepConv(kernel=[3, 3], stride=2, depth=128),
    DepthSepConv(kernel=[3, 3], stride=1, depth=128),
    DepthSepConv(kernel=[3, 3], stride=2, depth=256),
    DepthSepConv(kernel=[3, 3], stride=1, depth=256),
    DepthSepConv(kernel=[3, 3], stride=2, depth=512),
    DepthSepConv(kernel=[3, 3], stride=1, depth=512),
    DepthSepConv(kernel=[3, 3], stride=1, depth=512),
    DepthSepConv(kernel=[3, 3], stride=1, depth=512),
    DepthSepConv(kernel=[3, 3], stride=1, depth=512),
    DepthSepConv(kernel=[3, 3], stride=1, depth=512),
    DepthSepConv(kernel=[3, 3], stride=2, depth=1024),
    DepthSepConv(kernel=[3, 3], stride=1, depth=1024),
]

SUPPORTED_OUTPUT_STRIDES = (8, 16, 32)


def _layer_end_points(conv_defs: Sequence[ConvDef]) -> List[str]:
    """Names of every end point the body can stop at, in order."""
    names = []
    for index, conv_def in enumerate(conv_defs):
        if isinstance(conv_def, DepthSepConv):
            names += [f"Conv2d_{index}_depthwise", f"Conv2d_{index}_pointwise"]
        elif isinstance(conv_def, Conv):
            names.append(f"Conv2d_{index}")
        else:
            raise ValueError(
                f"Unknown convolution type {type(conv_def).__name__} for layer {index} of conv_defs; "
                "use mobilenet_v1.Conv or mobilenet_v1.DepthSepConv."
            )
    return names


def _body_layers(
    inputs: tf.Tensor,
    conv_defs: Sequence[ConvDef],
    depth: Callable[[int], int],
    output_stride: Optional[int],
    use_explicit_padding: bool,
) -> Iterator[Tuple[str, tf.Tensor]]:
    """Yield ``(end_point_name, tensor)`` layer by layer; each layer is built only when the caller asks for it."""
    net = inputs
    current_stride = 1
    rate = 1
    for index, conv_def in enumerate(conv_defs):
        if output_stride is not None and current_stride == output_stride:
            layer_stride, layer_rate = 1, rate
            rate *= conv_def.stride
        else:
            layer_stride, layer_rate = conv_def.stride, 1
            current_stride *= conv_def.stride
        if isinstance(conv_def, Conv):
            # As officially, a plain convolution keeps its own stride and no rate, even past output_stride.
            if use_explicit_padding:
                net = fixed_padding(net, conv_def.kernel)
            name = f"Conv2d_{index}"
            net = slim.conv2d(net, depth(conv_def.depth), conv_def.kernel, stride=conv_def.stride, scope=name)
            yield name, net
            continue
        if use_explicit_padding:
            net = fixed_padding(net, conv_def.kernel, layer_rate)
        name = f"Conv2d_{index}_depthwise"
        net = slim.separable_conv2d(
            net, None, conv_def.kernel, depth_multiplier=1, stride=layer_stride, rate=layer_rate, scope=name
        )
        yield name, net
        name = f"Conv2d_{index}_pointwise"
        net = slim.conv2d(net, depth(conv_def.depth), [1, 1], stride=1, scope=name)
        yield name, net


def mobilenet_v1_base(
    inputs: tf.Tensor,
    final_endpoint: str = "Conv2d_13_pointwise",
    min_depth: int = 8,
    depth_multiplier: float = 1.0,
    conv_defs: Optional[Sequence[ConvDef]] = None,
    output_stride: Optional[int] = None,
    use_explicit_padding: bool = False,
    scope: Optional[str] = None,
) -> Tuple[tf.Tensor, EndPoints]:
    """Build the convolutional body up to ``final_endpoint``; return ``(features, end_points)``.

    ``output_stride`` (8, 16 or 32) caps the total downsampling: once reached,
    later strides turn into atrous rates, as in DeepLab. ``use_explicit_padding``
    pads explicitly and convolves with VALID, so results do not depend on the
    parity of the input size.
    """
    if depth_multiplier <= 0:
        raise ValueError(f"depth_multiplier must be greater than zero, got {depth_multiplier}.")
    if output_stride is not None and output_stride not in SUPPORTED_OUTPUT_STRIDES:
        raise ValueError(f"output_stride must be None or one of {SUPPORTED_OUTPUT_STRIDES}, got {output_stride}.")
    conv_defs = MOBILENETV1_CONV_DEFS if conv_defs is None else tuple(conv_defs)
    valid_end_points = _layer_end_points(conv_defs)
    if final_endpoint not in valid_end_points:
        raise ValueError(f"final_endpoint must be one of {valid_end_points}, got {final_endpoint!r}.")

    def depth(channels: int) -> int:
        return max(int(channels * depth_multiplier), min_depth)

    end_points: EndPoints = {}
    padding = "VALID" if use_explicit_padding else "SAME"
    with tf.compat.v1.variable_scope(scope, "MobilenetV1", [inputs]):
        with slim.arg_scope([slim.conv2d, slim.separable_conv2d], padding=padding):
            layers = _body_layers(inputs, conv_defs, depth, output_stride, use_explicit_padding)
            for name, net in layers:
                end_points[name] = net
                if name == final_endpoint:
                    break
    return net, end_points


def _pooling_kernel(net: tf.Tensor, kernel: Sequence[int]) -> List[int]:
    """Shrink the 7x7 head pooling window to the feature map when the input image is small."""
    height, width = net.shape.as_list()[1:3]
    if height is None or width is None:
        return list(kernel)
    return [min(height, kernel[0]), min(width, kernel[1])]


def mobilenet_v1(
    inputs: tf.Tensor,
    num_classes: Optional[int] = 1000,
    dropout_keep_prob: float = 0.999,
    is_training: bool = True,
    min_depth: int = 8,
    depth_multiplier: float = 1.0,
    conv_defs: Optional[Sequence[ConvDef]] = None,
    prediction_fn: Callable[..., tf.Tensor] = slim.softmax,
    spatial_squeeze: bool = True,
    reuse: Optional[bool] = None,
    scope: str = "MobilenetV1",
    global_pool: bool = False,
) -> Tuple[tf.Tensor, EndPoints]:
    """Build the MobileNet v1 classifier on ``inputs`` [batch, height, width, 3]; return ``(logits, end_points)``.

    With ``num_classes`` 0 or None the pooled features are returned instead of
    logits. ``global_pool`` averages over the whole feature map instead of the
    official 7x7 window (useful for inputs larger than 224).
    """
    if inputs.shape.rank != 4:
        raise ValueError(f"inputs must be a 4-D [batch, height, width, channels] tensor, got shape {inputs.shape}.")
    with tf.compat.v1.variable_scope(scope, "MobilenetV1", [inputs], reuse=reuse) as variable_scope:
        with slim.arg_scope([slim.batch_norm, slim.dropout], is_training=is_training):
            net, end_points = mobilenet_v1_base(
                inputs,
                scope=variable_scope,
                min_depth=min_depth,
                depth_multiplier=depth_multiplier,
                conv_defs=conv_defs,
            )
            with tf.compat.v1.variable_scope("Logits"):
                if global_pool:
                    net = tf.reduce_mean(net, axis=[1, 2], keepdims=True, name="global_pool")
                    end_points["global_pool"] = net
                else:
                    net = slim.avg_pool2d(net, _pooling_kernel(net, [7, 7]), padding="VALID", scope="AvgPool_1a")
                    end_points["AvgPool_1a"] = net
                if not num_classes:
                    return net, end_points
                net = slim.dropout(net, keep_prob=dropout_keep_prob, scope="Dropout_1b")
                logits = slim.conv2d(
                    net, num_classes, [1, 1], activation_fn=None, normalizer_fn=None, scope="Conv2d_1c_1x1"
                )
                if spatial_squeeze:
                    logits = tf.squeeze(logits, [1, 2], name="SpatialSqueeze")
            end_points["Logits"] = logits
            end_points["Predictions"] = prediction_fn(logits, scope="Predictions")
    return logits, end_points


mobilenet_v1.default_image_size = 224


mobilenet_v1_075 = wrapped_partial(mobilenet_v1, depth_multiplier=0.75)
mobilenet_v1_050 = wrapped_partial(mobilenet_v1, depth_multiplier=0.50)
mobilenet_v1_025 = wrapped_partial(mobilenet_v1, depth_multiplier=0.25)


def mobilenet_v1_arg_scope(
    is_training: Optional[bool] = True,
    weight_decay: float = 0.00004,
    stddev: float = 0.09,
    regularize_depthwise: bool = False,
    batch_norm_decay: float = 0.9997,
    batch_norm_epsilon: float = 0.001,
    batch_norm_updates_collections: str = tf.compat.v1.GraphKeys.UPDATE_OPS,
    normalizer_fn: Optional[Callable[..., tf.Tensor]] = slim.batch_norm,
) -> dict:
    """Official MobileNet v1 defaults: ReLU6, batch norm with scale, L2 decay on (non-depthwise) weights.

    ``is_training=None`` leaves batch norm's mode to an enclosing arg_scope
    (the network function sets it from its own ``is_training``).
    """
    batch_norm_params = {
        "center": True,
        "scale": True,
        "decay": batch_norm_decay,
        "epsilon": batch_norm_epsilon,
        "updates_collections": batch_norm_updates_collections,
    }
    if is_training is not None:
        batch_norm_params["is_training"] = is_training
    regularizer = slim.l2_regularizer(weight_decay)
    depthwise_regularizer = regularizer if regularize_depthwise else None
    with slim.arg_scope(
        [slim.conv2d, slim.separable_conv2d],
        weights_initializer=tf.compat.v1.truncated_normal_initializer(stddev=stddev),
        activation_fn=tf.nn.relu6,
        normalizer_fn=normalizer_fn,
    ):
        with slim.arg_scope([slim.batch_norm], **batch_norm_params):
            with slim.arg_scope([slim.conv2d], weights_regularizer=regularizer):
                with slim.arg_scope([slim.separable_conv2d], weights_regularizer=depthwise_regularizer) as scope:
                    return scope
