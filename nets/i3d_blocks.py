"""3-D Inception-v1 building blocks shared by the video networks I3D and S3D-G.

Both networks inflate Inception v1 to video: every 2-D layer becomes a 3-D
one over [batch, time, height, width, channels] and keeps its Inception-v1
scope name (``InceptionV1/Mixed_3b/...``), so image checkpoints can seed them.
They differ only in options of the shared body built here:

* I3D (Carreira & Zisserman, 2017): full 3x3x3 convolutions, 7x7x7 stem.
* S3D-G (Xie et al., 2018): each kxkxk convolution is split into a 1xkxk
  spatial convolution and a kx1x1 temporal one, and feature maps are
  re-weighted by a learned, context-conditioned sigmoid gate.
"""

import dataclasses
from typing import Callable, Dict, Iterator, Optional, Sequence, Tuple, Union

import tensorflow as tf
import tf_slim as slim

EndPoints = Dict[str, tf.Tensor]
Triple = Sequence[int]

FIRST_TEMPORAL_KERNEL_SIZES = (1, 3, 5, 7)


@dataclasses.dataclass(frozen=True)
class StemConv:
    """The first, stride-2 convolution (never separable: it is slow and gains nothing)."""

    depth: int


@dataclasses.dataclass(frozen=True)
class PointwiseConv:
    """A 1x1x1 convolution."""

    depth: int


@dataclasses.dataclass(frozen=True)
class SpatiotemporalConv:
    """A 3x3 convolution whose temporal extent (1 or 3) depends on the network options."""

    depth: int


@dataclasses.dataclass(frozen=True)
class MaxPool:
    """A SAME-padded 3-D max pooling."""

    kernel: Tuple[int, int, int]
    stride: Tuple[int, int, int]


@dataclasses.dataclass(frozen=True)
class MixedDepths:
    """Output depths of the four branches of an Inception block (``*_reduce``: the 1x1 before a 3x3)."""

    branch_0: int
    branch_1_reduce: int
    branch_1: int
    branch_2_reduce: int
    branch_2: int
    branch_3: int


Layer = Union[StemConv, PointwiseConv, SpatiotemporalConv, MaxPool, MixedDepths]

INCEPTION_V1_3D_LAYERS: Tuple[Tuple[str, Layer], ...] = (
    ("Conv2d_1a_7x7", StemConv(64)),
    ("MaxPool_2a_3x3", MaxPool((1, 3, 3), (1, 2, 2))),
    ("Conv2d_2b_1x1", PointwiseConv(64)),
    ("Conv2d_2c_3x3", SpatiotemporalConv(192)),
    ("MaxPool_3a_3x3", MaxPool((1, 3, 3), (1, 2, 2))),
    ("Mixed_3b", MixedDepths(64, 96, 128, 16, 32, 32)),
    ("Mixed_3c", MixedDepths(128, 128, 192, 32, 96, 64)),
    ("MaxPool_4a_3x3", MaxPool((3, 3, 3), (2, 2, 2))),
    ("Mixed_4b", MixedDepths(192, 96, 208, 16, 48, 64)),
    ("Mixed_4c", MixedDepths(160, 112, 224, 24, 64, 64)),
    ("Mixed_4d", MixedDepths(128, 128, 256, 24, 64, 64)),
    ("Mixed_4e", MixedDepths(112, 144, 288, 32, 64, 64)),
    ("Mixed_4f", MixedDepths(256, 160, 320, 32, 128, 128)),
    ("MaxPool_5a_2x2", MaxPool((2, 2, 2), (2, 2, 2))),
    ("Mixed_5b", MixedDepths(256, 160, 320, 32, 128, 128)),
    ("Mixed_5c", MixedDepths(384, 192, 384, 48, 128, 128)),
)
END_POINT_NAMES = tuple(name for name, _ in INCEPTION_V1_3D_LAYERS)
# Blocks from which temporal convolutions or self-gating can be switched on.
SWITCHABLE_BLOCKS = tuple(
    name for name, layer in INCEPTION_V1_3D_LAYERS if isinstance(layer, (SpatiotemporalConv, MixedDepths))
)


def _truncated_normal(stddev: float) -> tf.compat.v1.truncated_normal_initializer:
    """Zero-mean truncated normal initializer."""
    return tf.compat.v1.truncated_normal_initializer(mean=0.0, stddev=stddev)


def centered_identity_initializer() -> Callable[..., tf.Tensor]:
    """Initializer for a [k, 1, 1, c, c] temporal kernel that starts as the identity map.

    Only the middle time tap is the identity matrix, so a freshly built
    separable block passes its spatial features through unchanged; S3D-G
    needs this to train from scratch.
    """

    def initializer(shape: Sequence[int], dtype: tf.DType = tf.float32, partition_info: object = None) -> tf.Tensor:
        shape = [int(size) for size in shape]
        if len(shape) != 5 or shape[1:3] != [1, 1] or shape[3] != shape[4] or shape[0] % 2 == 0:
            raise ValueError(
                f"centered_identity_initializer needs a [odd k, 1, 1, c, c] kernel shape, got {shape}; "
                "use it only for the temporal half of a separable convolution."
            )
        middle_tap = tf.one_hot(shape[0] // 2, shape[0], dtype=dtype)
        identity = tf.eye(shape[3], dtype=dtype)
        return tf.reshape(middle_tap, [shape[0], 1, 1, 1, 1]) * identity

    return initializer


@slim.add_arg_scope
def spatiotemporal_conv3d(
    inputs: tf.Tensor, num_outputs: int, kernel_size: Triple, scope: str, separable: bool = False
) -> tf.Tensor:
    """A stride-1 [t, h, w] 3-D convolution, or with ``separable`` a [1, h, w] one followed by a [t, 1, 1] one.

    Activation, normalizer and regularizer come from the ``slim.conv3d``
    arg_scope. The temporal half (scope ``<scope>/temporal``) has biases
    instead of batch norm and starts as the identity.
    """
    time_kernel, height_kernel, width_kernel = kernel_size
    if not separable or time_kernel == 1:
        return slim.conv3d(inputs, num_outputs, list(kernel_size), scope=scope)
    net = slim.conv3d(inputs, num_outputs, [1, height_kernel, width_kernel], scope=scope)
    return slim.conv3d(
        net,
        num_outputs,
        [time_kernel, 1, 1],
        normalizer_fn=None,
        weights_initializer=centered_identity_initializer(),
        scope=scope + "/temporal",
    )


def self_gate(inputs: tf.Tensor, scope: str) -> tf.Tensor:
    """S3D-G feature gating: scale each channel by sigmoid(W @ mean over time and space of ``inputs``)."""
    context = tf.reduce_mean(inputs, axis=[1, 2, 3], keepdims=True)
    gates = slim.conv3d(
        context,
        inputs.shape[-1],
        [1, 1, 1],
        activation_fn=None,
        normalizer_fn=None,
        biases_initializer=None,
        weights_initializer=_truncated_normal(0.01),
        scope=scope + "/self_gating/transformer_W",
    )
    return inputs * tf.sigmoid(gates)


def _max_pool(net: tf.Tensor, kernel: Triple, stride: Triple, scope: str) -> tf.Tensor:
    """SAME-padded 3-D max pooling."""
    return slim.max_pool3d(net, list(kernel), stride=list(stride), padding="SAME", scope=scope)


def inception_block_3d(
    inputs: tf.Tensor, depths: MixedDepths, temporal_kernel_size: int, gated: bool, scope: str
) -> tf.Tensor:
    """Four-branch Inception block (1x1 | 1x1>3x3 | 1x1>3x3 | pool>1x1), concatenated on channels."""

    def gate(net: tf.Tensor, name: str) -> tf.Tensor:
        return self_gate(net, name) if gated else net

    spatiotemporal = [temporal_kernel_size, 3, 3]
    with tf.compat.v1.variable_scope(scope):
        with tf.compat.v1.variable_scope("Branch_0"):
            branch_0 = gate(slim.conv3d(inputs, depths.branch_0, [1, 1, 1], scope="Conv2d_0a_1x1"), "Conv2d_0a_1x1")
        with tf.compat.v1.variable_scope("Branch_1"):
            branch_1 = slim.conv3d(inputs, depths.branch_1_reduce, [1, 1, 1], scope="Conv2d_0a_1x1")
            branch_1 = spatiotemporal_conv3d(branch_1, depths.branch_1, spatiotemporal, scope="Conv2d_0b_3x3")
            branch_1 = gate(branch_1, "Conv2d_0b_3x3")
        with tf.compat.v1.variable_scope("Branch_2"):
            branch_2 = slim.conv3d(inputs, depths.branch_2_reduce, [1, 1, 1], scope="Conv2d_0a_1x1")
            branch_2 = spatiotemporal_conv3d(branch_2, depths.branch_2, spatiotemporal, scope="Conv2d_0b_3x3")
            branch_2 = gate(branch_2, "Conv2d_0b_3x3")
        with tf.compat.v1.variable_scope("Branch_3"):
            branch_3 = _max_pool(inputs, [3, 3, 3], [1, 1, 1], scope="MaxPool_0a_3x3")
            branch_3 = gate(slim.conv3d(branch_3, depths.branch_3, [1, 1, 1], scope="Conv2d_0b_1x1"), "Conv2d_0b_1x1")
        return tf.concat([branch_0, branch_1, branch_2, branch_3], axis=4)


def _scaled_depths(depths: MixedDepths, depth: Callable[[int], int]) -> MixedDepths:
    """Apply the width multiplier to every branch of a block."""
    return MixedDepths(*(depth(value) for value in dataclasses.astuple(depths)))


def _body_layers(
    inputs: tf.Tensor,
    first_temporal_kernel_size: int,
    temporal_conv_startat: Optional[str],
    gating_startat: Optional[str],
    depth: Callable[[int], int],
) -> Iterator[Tuple[str, tf.Tensor]]:
    """Yield ``(end_point_name, tensor)`` layer by layer; each layer is built only when the caller asks for it."""
    net = inputs
    temporal_kernel_size = 1
    gated = False
    for name, layer in INCEPTION_V1_3D_LAYERS:
        if name == temporal_conv_startat:
            temporal_kernel_size = 3
        if name == gating_startat:
            gated = True
        if isinstance(layer, StemConv):
            kernel = [first_temporal_kernel_size, 7, 7]
            net = slim.conv3d(net, depth(layer.depth), kernel, stride=2, scope=name)
        elif isinstance(layer, MaxPool):
            net = _max_pool(net, layer.kernel, layer.stride, scope=name)
        elif isinstance(layer, PointwiseConv):
            net = slim.conv3d(net, depth(layer.depth), [1, 1, 1], scope=name)
        elif isinstance(layer, SpatiotemporalConv):
            net = spatiotemporal_conv3d(net, depth(layer.depth), [temporal_kernel_size, 3, 3], scope=name)
            if gated:
                net = self_gate(net, name)
        else:
            net = inception_block_3d(net, _scaled_depths(layer, depth), temporal_kernel_size, gated, scope=name)
        yield name, net


def _check_options(
    inputs: tf.Tensor,
    first_temporal_kernel_size: int,
    temporal_conv_startat: Optional[str],
    gating_startat: Optional[str],
    final_endpoint: str,
    depth_multiplier: float,
) -> None:
    """Reject bad body options with an error that names the argument and its allowed values."""
    if inputs.shape.rank != 5:
        raise ValueError(
            f"inputs must be a 5-D [batch, frames, height, width, channels] video tensor, got shape {inputs.shape}."
        )
    if first_temporal_kernel_size not in FIRST_TEMPORAL_KERNEL_SIZES:
        raise ValueError(
            f"first_temporal_kernel_size must be one of {FIRST_TEMPORAL_KERNEL_SIZES}, "
            f"got {first_temporal_kernel_size}."
        )
    for argument, value in (("temporal_conv_startat", temporal_conv_startat), ("gating_startat", gating_startat)):
        if value is not None and value not in SWITCHABLE_BLOCKS:
            raise ValueError(f"{argument} must be None or one of {SWITCHABLE_BLOCKS}, got {value!r}.")
    if final_endpoint not in END_POINT_NAMES:
        raise ValueError(f"final_endpoint must be one of {END_POINT_NAMES}, got {final_endpoint!r}.")
    if depth_multiplier <= 0:
        raise ValueError(f"depth_multiplier must be greater than zero, got {depth_multiplier}.")


def inception_v1_3d_base(
    inputs: tf.Tensor,
    first_temporal_kernel_size: int = 3,
    temporal_conv_startat: Optional[str] = "Conv2d_2c_3x3",
    gating_startat: Optional[str] = "Conv2d_2c_3x3",
    final_endpoint: str = "Mixed_5c",
    min_depth: int = 16,
    depth_multiplier: float = 1.0,
    scope: Union[str, tf.compat.v1.VariableScope] = "InceptionV1",
) -> Tuple[tf.Tensor, EndPoints]:
    """Build the 3-D Inception-v1 body up to ``final_endpoint``; return ``(features, end_points)``.

    From block ``temporal_conv_startat`` on, 3x3 convolutions also span 3
    frames (before it they are 1x3x3); from block ``gating_startat`` on, the
    outputs are self-gated. None keeps the feature off everywhere.
    Separable or full 3-D convolutions are chosen by the ``separable`` arg_scope
    of ``spatiotemporal_conv3d``.
    """
    _check_options(
        inputs, first_temporal_kernel_size, temporal_conv_startat, gating_startat, final_endpoint, depth_multiplier
    )

    def depth(channels: int) -> int:
        return max(int(channels * depth_multiplier), min_depth)

    end_points: EndPoints = {}
    with tf.compat.v1.variable_scope(scope, "InceptionV1", [inputs]):
        with slim.arg_scope([slim.conv3d], weights_initializer=_truncated_normal(0.01)):
            layers = _body_layers(inputs, first_temporal_kernel_size, temporal_conv_startat, gating_startat, depth)
            for name, net in layers:
                end_points[name] = net
                if name == final_endpoint:
                    break
    return net, end_points


def _pooling_kernel(net: tf.Tensor, kernel: Triple) -> list:
    """Shrink the [2, 7, 7] head pooling window to the feature map for short or small clips."""
    sizes = net.shape.as_list()[1:4]
    if None in sizes:
        return list(kernel)
    return [min(size, window) for size, window in zip(sizes, kernel)]


def video_classifier(
    inputs: tf.Tensor,
    num_classes: int,
    dropout_keep_prob: float,
    is_training: bool,
    prediction_fn: Callable[..., tf.Tensor],
    spatial_squeeze: bool,
    reuse: Optional[bool],
    scope: str,
    **base_options,
) -> Tuple[tf.Tensor, EndPoints]:
    """Body + head shared by I3D and S3D-G; ``base_options`` go to ``inception_v1_3d_base``.

    The head average-pools a [2, 7, 7] window, applies dropout and a 1x1x1
    classifier, then averages the per-window logits over time.
    """
    with tf.compat.v1.variable_scope(scope, "InceptionV1", [inputs], reuse=reuse) as variable_scope:
        with slim.arg_scope([slim.batch_norm, slim.dropout], is_training=is_training):
            net, end_points = inception_v1_3d_base(inputs, scope=variable_scope, **base_options)
            with tf.compat.v1.variable_scope("Logits"):
                net = slim.avg_pool3d(net, _pooling_kernel(net, [2, 7, 7]), stride=1, scope="AvgPool_0a_7x7")
                net = slim.dropout(net, dropout_keep_prob, scope="Dropout_0b")
                logits = slim.conv3d(
                    net, num_classes, [1, 1, 1], activation_fn=None, normalizer_fn=None, scope="Conv2d_0c_1x1"
                )
                logits = tf.reduce_mean(logits, axis=1)
                if spatial_squeeze:
                    logits = tf.squeeze(logits, [1, 2], name="SpatialSqueeze")
                end_points["Logits"] = logits
                end_points["Predictions"] = prediction_fn(logits, scope="Predictions")
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
        [slim.conv3d],
        weights_regularizer=slim.l2_regularizer(weight_decay),
        activation_fn=tf.nn.relu,
        normalizer_fn=slim.batch_norm,
        normalizer_params=batch_norm_params,
    ):
        with slim.arg_scope([spatiotemporal_conv3d], separable=separable_conv3d) as scope:
            return scope
