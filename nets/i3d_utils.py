"""3-D building blocks of the video networks I3D and S3D-G (official ``nets/i3d_utils.py``).

Both inflate Inception v1 to video: every 2-D layer becomes a 3-D one over
[batch, time, height, width, channels] (``NDHWC``; ``NCDHW`` puts channels
second) and keeps its Inception-v1 scope name.
"""

from typing import Callable, List, Optional, Sequence, Union

import tensorflow as tf
import tf_slim as slim

add_arg_scope = slim.add_arg_scope
layers = slim.layers

IntOrTriple = Union[int, Sequence[int]]


def center_initializer() -> Callable[..., tf.Tensor]:
    """Initializer for a [k, 1, 1, c, c] temporal kernel that starts as the identity map.

    Only the middle time tap is the identity matrix, so a freshly built
    separable convolution passes its spatial features through unchanged;
    separable I3D / S3D-G need this to train from scratch.

    Returns:
        ``initializer(shape, dtype=tf.float32, partition_info=None)``.

    Raises (when called):
        ValueError: for a dtype other than float32/bfloat16, or a shape that is not [odd k, 1, 1, c, c].
    """

    def initializer(shape: Sequence[int], dtype: tf.DType = tf.float32, partition_info: object = None) -> tf.Tensor:
        del partition_info  # Part of the initializer protocol; the kernel is never partitioned.
        shape = [int(size) for size in shape]
        if dtype not in (tf.float32, tf.bfloat16):
            raise ValueError(f"center_initializer needs a float32 or bfloat16 kernel, got {dtype}.")
        if len(shape) != 5 or shape[1:3] != [1, 1] or shape[3] != shape[4] or shape[0] % 2 == 0:
            raise ValueError(
                f"center_initializer needs a [odd k, 1, 1, c, c] kernel shape, got {shape}; "
                "use it only for the temporal half of a separable convolution."
            )
        middle_tap = tf.one_hot(shape[0] // 2, shape[0], dtype=dtype)
        identity = tf.eye(shape[3], dtype=dtype)
        return tf.reshape(middle_tap, [shape[0], 1, 1, 1, 1]) * identity

    return initializer


def _split_stride(stride: IntOrTriple) -> tuple:
    """The strides of the spatial [1, h, w] and temporal [t, 1, 1] halves of a separable convolution."""
    if isinstance(stride, (list, tuple)) and len(stride) == 3:
        return [1, stride[1], stride[2]], [stride[0], 1, 1]
    return [1, stride, stride], [stride, 1, 1]


@add_arg_scope
def conv3d_spatiotemporal(
    inputs: tf.Tensor,
    num_outputs: int,
    kernel_size: Sequence[int],
    stride: IntOrTriple = 1,
    padding: str = "SAME",
    activation_fn: Optional[Callable[[tf.Tensor], tf.Tensor]] = None,
    normalizer_fn: Optional[Callable[..., tf.Tensor]] = None,
    normalizer_params: Optional[dict] = None,
    weights_regularizer: Optional[Callable[[tf.Tensor], tf.Tensor]] = None,
    separable: bool = False,
    data_format: str = "NDHWC",
    scope: str = "",
) -> tf.Tensor:
    """A [t, h, w] 3-D convolution or, with ``separable``, a [1, h, w] one followed by a [t, 1, 1] one.

    The temporal half (scope ``<scope>/temporal``) has biases instead of the
    normalizer, the same activation, and starts as the identity
    (``center_initializer``). A kernel of temporal size 1 is never split.

    Args:
        inputs: a 5-D video tensor.
        num_outputs: output channels (of both halves).
        kernel_size: [time, height, width].
        stride: an int or [time, height, width].
        padding: ``SAME`` or ``VALID``.
        activation_fn, normalizer_fn, normalizer_params, weights_regularizer: as for ``slim.conv3d``.
        separable: split the kernel into its spatial and temporal parts.
        data_format: ``NDHWC`` or ``NCDHW``.
        scope: variable scope of the (spatial) convolution.

    Returns:
        The output tensor.
    """
    if len(kernel_size) != 3:
        raise ValueError(f"kernel_size must be [time, height, width], got {kernel_size}.")
    conv_options = {"padding": padding, "activation_fn": activation_fn, "data_format": data_format}
    time_kernel, height_kernel, width_kernel = kernel_size
    if not separable or time_kernel == 1:
        return slim.conv3d(
            inputs,
            num_outputs,
            list(kernel_size),
            stride=stride,
            normalizer_fn=normalizer_fn,
            normalizer_params=normalizer_params,
            weights_regularizer=weights_regularizer,
            scope=scope,
            **conv_options,
        )
    spatial_stride, temporal_stride = _split_stride(stride)
    net = slim.conv3d(
        inputs,
        num_outputs,
        [1, height_kernel, width_kernel],
        stride=spatial_stride,
        normalizer_fn=normalizer_fn,
        normalizer_params=normalizer_params,
        weights_regularizer=weights_regularizer,
        scope=scope,
        **conv_options,
    )
    return slim.conv3d(
        net,
        num_outputs,
        [time_kernel, 1, 1],
        stride=temporal_stride,
        normalizer_fn=None,
        weights_initializer=center_initializer(),
        scope=scope + "/temporal",
        **conv_options,
    )


@add_arg_scope
def inception_block_v1_3d(
    inputs: tf.Tensor,
    num_outputs_0_0a: int,
    num_outputs_1_0a: int,
    num_outputs_1_0b: int,
    num_outputs_2_0a: int,
    num_outputs_2_0b: int,
    num_outputs_3_0b: int,
    temporal_kernel_size: int = 3,
    self_gating_fn: Optional[Callable[..., tf.Tensor]] = None,
    data_format: str = "NDHWC",
    scope: str = "",
) -> tf.Tensor:
    """A 3-D Inception v1 block: 1x1 | 1x1 > 3x3 | 1x1 > 3x3 | 3x3 max pool > 1x1, concatenated on channels.

    The 3x3 convolutions are ``conv3d_spatiotemporal`` with ``temporal_kernel_size``
    frames (separable or not, per its arg_scope). ``self_gating_fn(net, scope=...)``,
    when given, gates each branch's output (S3D-G).

    Args:
        inputs: a 5-D video tensor.
        num_outputs_0_0a: channels of Branch_0's 1x1.
        num_outputs_1_0a, num_outputs_1_0b: Branch_1's 1x1 and 3x3.
        num_outputs_2_0a, num_outputs_2_0b: Branch_2's 1x1 and 3x3.
        num_outputs_3_0b: Branch_3's 1x1 after the max pool.
        temporal_kernel_size: temporal extent of the 3x3 convolutions.
        self_gating_fn: optional gate applied to every branch.
        data_format: ``NDHWC`` or ``NCDHW``.
        scope: variable scope of the block.

    Returns:
        The concatenated branches.
    """

    def gate(net: tf.Tensor, name: str) -> tf.Tensor:
        return self_gating_fn(net, scope=name) if self_gating_fn is not None else net

    spatiotemporal = [temporal_kernel_size, 3, 3]
    with tf.compat.v1.variable_scope(scope):
        with tf.compat.v1.variable_scope("Branch_0"):
            branch_0 = gate(layers.conv3d(inputs, num_outputs_0_0a, [1, 1, 1], scope="Conv2d_0a_1x1"), "Conv2d_0a_1x1")
        with tf.compat.v1.variable_scope("Branch_1"):
            branch_1 = layers.conv3d(inputs, num_outputs_1_0a, [1, 1, 1], scope="Conv2d_0a_1x1")
            branch_1 = conv3d_spatiotemporal(branch_1, num_outputs_1_0b, spatiotemporal, scope="Conv2d_0b_3x3")
            branch_1 = gate(branch_1, "Conv2d_0b_3x3")
        with tf.compat.v1.variable_scope("Branch_2"):
            branch_2 = layers.conv3d(inputs, num_outputs_2_0a, [1, 1, 1], scope="Conv2d_0a_1x1")
            branch_2 = conv3d_spatiotemporal(branch_2, num_outputs_2_0b, spatiotemporal, scope="Conv2d_0b_3x3")
            branch_2 = gate(branch_2, "Conv2d_0b_3x3")
        with tf.compat.v1.variable_scope("Branch_3"):
            branch_3 = layers.max_pool3d(inputs, [3, 3, 3], scope="MaxPool_0a_3x3")
            branch_3 = layers.conv3d(branch_3, num_outputs_3_0b, [1, 1, 1], scope="Conv2d_0b_1x1")
            branch_3 = gate(branch_3, "Conv2d_0b_1x1")
        return tf.concat([branch_0, branch_1, branch_2, branch_3], data_format.index("C"))


def reduced_kernel_size_3d(input_tensor: tf.Tensor, kernel_size: Sequence[int]) -> List[int]:
    """``kernel_size`` [time, height, width] shrunk to ``input_tensor``'s (NDHWC) extent where that is smaller.

    With an unknown time, height or width the kernel is returned unchanged.
    """
    if len(kernel_size) != 3:
        raise ValueError(f"kernel_size must be [time, height, width], got {kernel_size}.")
    sizes = input_tensor.get_shape().as_list()[1:4]
    if None in sizes:
        return list(kernel_size)
    return [min(size, window) for size, window in zip(sizes, kernel_size)]
