"""The 3-D Inception-v1 body, head and arg_scope shared by the video networks I3D and S3D-G.

Both inflate the Inception v1 layer table (``inception_v1_layers.py``) to
video and keep its scope names (``InceptionV1/Mixed_3b/...``). They differ
only in options of the shared body built here:

* I3D (Carreira & Zisserman, 2017): full 3x3x3 convolutions, 7x7x7 stem, no gating.
* S3D-G (Xie et al., 2018): each kxkxk convolution is split into a 1xkxk
  spatial convolution and a kx1x1 temporal one, and feature maps are
  re-weighted by a learned, context-conditioned sigmoid gate.
"""

import dataclasses
from typing import Callable, Dict, Iterator, Optional, Tuple, Union

import tensorflow as tf
import tf_slim as slim

from nets._impl import inception_parts
from nets._impl.initializers import trunc_normal
from nets._impl.inception_v1_layers import (
    END_POINT_NAMES,
    INCEPTION_V1_LAYERS,
    MaxPool,
    MixedDepths,
    PointwiseConv,
    SpatiotemporalConv,
    StemConv,
)
from nets.i3d_utils import conv3d_spatiotemporal, inception_block_v1_3d, reduced_kernel_size_3d

EndPoints = Dict[str, tf.Tensor]

FIRST_TEMPORAL_KERNEL_SIZES = (1, 3, 5, 7)
DATA_FORMATS = ("NDHWC", "NCDHW")
# Blocks from which temporal convolutions or self-gating can be switched on.
SWITCHABLE_BLOCKS = tuple(
    name for name, layer in INCEPTION_V1_LAYERS if isinstance(layer, (SpatiotemporalConv, MixedDepths))
)


@dataclasses.dataclass(frozen=True)
class BodyOptions:
    """The options that tell I3D, S3D-G and their variants apart."""

    first_temporal_kernel_size: int = 3
    temporal_conv_startat: Optional[str] = "Conv2d_2c_3x3"
    gating_startat: Optional[str] = "Conv2d_2c_3x3"
    final_endpoint: str = "Mixed_5c"
    min_depth: int = 16
    depth_multiplier: float = 1.0
    data_format: str = "NDHWC"


def self_gating(input_tensor: tf.Tensor, scope: str, data_format: str = "NDHWC") -> tf.Tensor:
    """S3D-G feature gating: scale each channel by sigmoid(W @ mean over time and space of ``input_tensor``).

    Args:
        input_tensor: a 5-D video tensor.
        scope: prefix of the gate's variable scope (``<scope>/self_gating/transformer_W``).
        data_format: ``NDHWC`` or ``NCDHW``.

    Returns:
        A tensor of the shape of ``input_tensor``.
    """
    channel_axis = data_format.index("C")
    other_axes = [axis for axis in (1, 2, 3, 4) if axis != channel_axis]
    context = tf.reduce_mean(input_tensor, axis=other_axes, keepdims=True)
    gates = slim.conv3d(
        context,
        input_tensor.shape[channel_axis],
        [1, 1, 1],
        activation_fn=None,
        normalizer_fn=None,
        biases_initializer=None,
        weights_initializer=trunc_normal(0.01),
        data_format=data_format,
        scope=scope + "/self_gating/transformer_W",
    )
    return tf.multiply(tf.sigmoid(gates), input_tensor)  # an op named ``Mul``, as the official graph's


def _check_options(inputs: tf.Tensor, options: BodyOptions) -> None:
    """Reject bad body options with an error that names the argument and its allowed values."""
    if inputs.shape.rank != 5:
        raise ValueError(
            f"inputs must be a 5-D [batch, frames, height, width, channels] video tensor, got shape {inputs.shape}."
        )
    if options.data_format not in DATA_FORMATS:
        raise ValueError(f"data_format={options.data_format!r} must be one of {DATA_FORMATS}.")
    if options.first_temporal_kernel_size not in FIRST_TEMPORAL_KERNEL_SIZES:
        raise ValueError(
            f"first_temporal_kernel_size must be one of {FIRST_TEMPORAL_KERNEL_SIZES}, "
            f"got {options.first_temporal_kernel_size}."
        )
    for argument in ("temporal_conv_startat", "gating_startat"):
        value = getattr(options, argument)
        if value is not None and value not in SWITCHABLE_BLOCKS:
            raise ValueError(f"{argument} must be None or one of {SWITCHABLE_BLOCKS}, got {value!r}.")
    if options.final_endpoint not in END_POINT_NAMES:
        raise ValueError(f"final_endpoint must be one of {END_POINT_NAMES}, got {options.final_endpoint!r}.")


def _body_layers(
    inputs: tf.Tensor, options: BodyOptions, depth: Callable[[int], int]
) -> Iterator[Tuple[str, tf.Tensor]]:
    """Yield ``(end_point_name, tensor)`` layer by layer; each layer is built only when the caller asks for it."""

    def gating_fn(net: tf.Tensor, scope: str) -> tf.Tensor:
        return self_gating(net, scope, data_format=options.data_format)

    net = inputs
    temporal_kernel_size = 1
    gate = None
    for name, layer in INCEPTION_V1_LAYERS:
        if name == options.temporal_conv_startat:
            temporal_kernel_size = 3
        if name == options.gating_startat:
            gate = gating_fn
        if isinstance(layer, StemConv):
            kernel = [options.first_temporal_kernel_size, 7, 7]
            net = conv3d_spatiotemporal(net, depth(layer.depth), kernel, stride=2, separable=False, scope=name)
        elif isinstance(layer, MaxPool):
            net = slim.max_pool3d(net, list(layer.kernel), stride=list(layer.stride), scope=name)
        elif isinstance(layer, PointwiseConv):
            net = slim.conv3d(net, depth(layer.depth), [1, 1, 1], scope=name)
        elif isinstance(layer, SpatiotemporalConv):
            net = conv3d_spatiotemporal(net, depth(layer.depth), [temporal_kernel_size, 3, 3], scope=name)
            if gate is not None:
                net = gate(net, name)
        else:
            net = inception_block_v1_3d(
                net,
                *(depth(value) for value in dataclasses.astuple(layer)),
                temporal_kernel_size=temporal_kernel_size,
                self_gating_fn=gate,
                data_format=options.data_format,
                scope=name,
            )
        yield name, net


def inception_v1_3d_base(
    inputs: tf.Tensor, options: BodyOptions, scope: Union[str, tf.compat.v1.VariableScope] = "InceptionV1"
) -> Tuple[tf.Tensor, EndPoints]:
    """Build the 3-D Inception-v1 body up to ``options.final_endpoint``; return ``(features, end_points)``.

    From block ``temporal_conv_startat`` on, 3x3 convolutions also span 3
    frames (before it they are 1x3x3); from block ``gating_startat`` on, the
    outputs are self-gated. None keeps the feature off everywhere. Separable or
    full 3-D convolutions are chosen by the ``separable`` arg_scope of
    ``conv3d_spatiotemporal``.

    Raises:
        ValueError: naming the bad option (rank of ``inputs``, data format, kernel size, block names,
            ``depth_multiplier``).
    """
    _check_options(inputs, options)
    depth = inception_parts.depth_function(options.depth_multiplier, options.min_depth)
    end_points: EndPoints = {}
    with tf.compat.v1.variable_scope(scope, "InceptionV1", [inputs]):
        with slim.arg_scope([slim.conv3d], weights_initializer=trunc_normal(0.01)):
            with slim.arg_scope(
                [slim.conv3d, slim.max_pool3d, conv3d_spatiotemporal],
                stride=1,
                padding="SAME",
                data_format=options.data_format,
            ):
                for name, net in _body_layers(inputs, options, depth):
                    end_points[name] = net
                    if name == options.final_endpoint:
                        break
    return net, end_points


@dataclasses.dataclass(frozen=True)
class HeadOptions:
    """The caller's classification-head arguments."""

    num_classes: int
    dropout_keep_prob: float
    is_training: bool
    prediction_fn: Callable[..., tf.Tensor]
    spatial_squeeze: bool
    reuse: Optional[bool]
    scope: str


def video_classifier(inputs: tf.Tensor, head: HeadOptions, body: BodyOptions) -> Tuple[tf.Tensor, EndPoints]:
    """Body + head shared by I3D and S3D-G.

    The head average-pools a [2, 7, 7] window (shrunk for short or small clips),
    applies dropout and a 1x1x1 classifier, then averages the per-window logits
    over time.
    """
    with tf.compat.v1.variable_scope(head.scope, "InceptionV1", [inputs], reuse=head.reuse) as variable_scope:
        with slim.arg_scope([slim.batch_norm, slim.dropout], is_training=head.is_training):
            net, end_points = inception_v1_3d_base(inputs, body, scope=variable_scope)
            with tf.compat.v1.variable_scope("Logits"):
                if body.data_format.startswith("NC"):
                    net = tf.transpose(net, perm=[0, 2, 3, 4, 1])
                kernel = reduced_kernel_size_3d(net, [2, 7, 7])
                net = slim.avg_pool3d(net, kernel, stride=1, data_format="NDHWC", scope="AvgPool_0a_7x7")
                net = slim.dropout(net, head.dropout_keep_prob, scope="Dropout_0b")
                logits = slim.conv3d(
                    net,
                    head.num_classes,
                    [1, 1, 1],
                    activation_fn=None,
                    normalizer_fn=None,
                    data_format="NDHWC",
                    scope="Conv2d_0c_1x1",
                )
                logits = tf.reduce_mean(logits, axis=1)
                logits = inception_parts.squeeze_if(logits, head.spatial_squeeze)
                end_points["Logits"] = logits
                end_points["Predictions"] = head.prediction_fn(logits, scope="Predictions")
    return logits, end_points


def video_arg_scope(
    weight_decay: float,
    batch_norm_decay: float,
    batch_norm_epsilon: float,
    use_renorm: bool,
    separable_conv3d: bool,
) -> dict:
    """The official video-net defaults: ReLU, unfused batch norm without scale, L2 decay on all 3-D kernels.

    Moving statistics also go to the ``moving_vars`` collection, as in the
    official definitions.
    """
    batch_norm_params = {
        "decay": batch_norm_decay,
        "epsilon": batch_norm_epsilon,
        "fused": False,
        "renorm": use_renorm,
        "variables_collections": {
            "beta": None,
            "gamma": None,
            "moving_mean": ["moving_vars"],
            "moving_variance": ["moving_vars"],
        },
    }
    with slim.arg_scope(
        [slim.conv3d, conv3d_spatiotemporal],
        weights_regularizer=slim.l2_regularizer(weight_decay),
        activation_fn=tf.nn.relu,
        normalizer_fn=slim.batch_norm,
        normalizer_params=batch_norm_params,
    ):
        with slim.arg_scope([conv3d_spatiotemporal], separable=separable_conv3d) as scope:
            return scope
