"""The convolution blocks MobileNet v2/v3 conv defs are made of (official ``nets.mobilenet.conv_blocks``).

``expanded_conv`` is the inverted-residual block: 1x1 expansion, depthwise
convolution, optional transform (squeeze-excite in v3), linear 1x1 projection
and a residual sum. Its inner tensors are named ``expansion_output``,
``depthwise_output`` and ``output``, which ``mobilenet_base`` turns into the
``layer_<n>/...`` end points. Every block is ``slim.add_arg_scope``'d, so a conv
def's ``defaults``/``overrides`` (or the caller's arg scope) can set any argument.
"""

import functools
from typing import Callable, Dict, Optional, Sequence, Union

import tensorflow as tf
import tf_slim as slim

from nets._impl.mobilenet_layers import average_pool, fixed_padding, make_divisible, split_divisible

DEPTHWISE_LOCATIONS = (None, "input", "output", "expansion")


@slim.add_arg_scope
def split_separable_conv2d(
    input_tensor: tf.Tensor,
    num_outputs: int,
    scope: Optional[str] = None,
    normalizer_fn: Optional[Callable] = None,
    stride: int = 1,
    rate: int = 1,
    endpoints: Optional[Dict[str, tf.Tensor]] = None,
    use_explicit_padding: bool = False,
) -> tf.Tensor:
    """A MobileNet v1 separable block: 3x3 depthwise then 1x1 pointwise, each with normalizer and activation.

    Unlike ``slim.separable_conv2d`` the depthwise output is normalized and activated
    too. The scopes are ``<scope>_depthwise`` and ``<scope>_pointwise`` (the v1
    checkpoint names), or ``separable[_n]/depthwise|pointwise`` without ``scope``.

    Args:
      input_tensor: [batch, height, width, channels] input.
      num_outputs: depth of the pointwise output.
      scope: prefix of the two scopes, or None for a fresh ``separable`` scope.
      normalizer_fn: normalizer of both convolutions.
      stride: depthwise stride.
      rate: depthwise dilation rate.
      endpoints: if given, receives both outputs under their scope names.
      use_explicit_padding: pad explicitly and convolve with VALID padding.

    Returns:
      The pointwise output.
    """
    endpoints = {} if endpoints is None else endpoints
    kernel_size = [3, 3]
    padding = "SAME"
    if use_explicit_padding:
        padding = "VALID"
        input_tensor = fixed_padding(input_tensor, kernel_size, rate)

    def build(prefix: str) -> tf.Tensor:
        depthwise_scope, pointwise_scope = prefix + "depthwise", prefix + "pointwise"
        net = slim.separable_conv2d(
            input_tensor, None, kernel_size, depth_multiplier=1, stride=stride, rate=rate,
            normalizer_fn=normalizer_fn, padding=padding, scope=depthwise_scope,
        )
        endpoints[depthwise_scope] = net
        net = slim.conv2d(net, num_outputs, [1, 1], stride=1, normalizer_fn=normalizer_fn, scope=pointwise_scope)
        endpoints[pointwise_scope] = net
        return net

    if scope is not None:
        return build(scope + "_")
    with tf.compat.v1.variable_scope(None, default_name="separable") as separable_scope:
        with tf.compat.v1.name_scope(separable_scope.original_name_scope):
            return build("")


def expand_input_by_factor(n: float, divisible_by: int = 8) -> Callable[..., int]:
    """An ``expansion_size`` for ``expanded_conv``: ``n`` times the input depth, rounded to ``divisible_by``."""

    def expansion_size(num_inputs: int, **unused_kwargs) -> int:
        return make_divisible(num_inputs * n, divisible_by)

    return expansion_size


def split_conv(
    input_tensor: tf.Tensor,
    num_outputs: int,
    num_ways: int,
    scope: str,
    divisible_by: int = 8,
    **kwargs,
) -> tf.Tensor:
    """A 1x1 convolution split into ``num_ways`` groups: the i-th input part feeds only the i-th output part.

    Without splitting (``num_ways`` 1, or a part would have fewer than
    ``divisible_by`` channels on either side) it is one ``slim.conv2d`` named
    ``scope``; otherwise the parts are ``<scope>_part_<i>`` and their outputs
    ``<scope>_part_<i>_output``. ``kwargs`` go to every ``slim.conv2d``.

    Returns:
      The [batch, height, width, num_outputs] output.
    """
    input_depth = input_tensor.shape.as_list()[3]
    if num_ways == 1 or min(input_depth // num_ways, num_outputs // num_ways) < divisible_by:
        return slim.conv2d(input_tensor, num_outputs, [1, 1], scope=scope, **kwargs)
    input_parts = tf.split(
        input_tensor, split_divisible(input_depth, num_ways, divisible_by), axis=3, name="split_" + scope
    )
    outputs = []
    for index, (part, part_depth) in enumerate(zip(input_parts, split_divisible(num_outputs, num_ways, divisible_by))):
        part_scope = f"{scope}_part_{index}"
        part_output = slim.conv2d(part, part_depth, [1, 1], scope=part_scope, **kwargs)
        outputs.append(tf.identity(part_output, part_scope + "_output"))
    return tf.concat(outputs, 3, name=scope + "_concat")


def _split_or_custom(conv_fn: Callable, num_ways: int, divisible_by: int) -> Callable:
    """``conv_fn`` ready to be called as ``fn(net, depth, scope=..., ...)``; ``split_conv`` gets its split."""
    if conv_fn is split_conv:
        return functools.partial(split_conv, num_ways=num_ways, divisible_by=divisible_by, stride=1)
    return conv_fn


@slim.add_arg_scope
def expanded_conv(
    input_tensor: tf.Tensor,
    num_outputs: int,
    expansion_size: Union[int, Callable[..., int]] = expand_input_by_factor(6),
    stride: int = 1,
    rate: int = 1,
    kernel_size: Sequence[int] = (3, 3),
    residual: Union[bool, Callable[..., tf.Tensor]] = True,
    normalizer_fn: Optional[Callable] = None,
    split_projection: int = 1,
    split_expansion: int = 1,
    split_divisible_by: int = 8,
    expansion_transform: Optional[Callable[..., tf.Tensor]] = None,
    depthwise_location: Optional[str] = "expansion",
    depthwise_channel_multiplier: int = 1,
    endpoints: Optional[Dict[str, tf.Tensor]] = None,
    use_explicit_padding: bool = False,
    padding: str = "SAME",
    inner_activation_fn: Optional[Callable] = None,
    depthwise_activation_fn: Optional[Callable] = None,
    project_activation_fn: Callable = tf.identity,
    depthwise_fn: Callable = slim.separable_conv2d,
    expansion_fn: Callable = split_conv,
    projection_fn: Callable = split_conv,
    scope: Optional[str] = None,
) -> tf.Tensor:
    """The inverted-residual block: expansion (1x1) -> depthwise (``kernel_size``) -> projection (1x1).

    Args:
      input_tensor: [batch, height, width, channels] input.
      num_outputs: depth of the projection (the block's output).
      expansion_size: inner depth, or a callable given ``num_inputs=`` (and
        possibly more keywords) returning it; no expansion layer is built when it
        is not larger than the input depth.
      stride: depthwise stride.
      rate: depthwise dilation rate.
      kernel_size: depthwise kernel.
      residual: add the input to the output when strides and depths allow; a
        callable ``residual(input_tensor=, output_tensor=)`` replaces the sum.
      normalizer_fn: normalizer of every inner convolution.
      split_projection: groups of the projection (``split_conv``).
      split_expansion: groups of the expansion (``split_conv``).
      split_divisible_by: every group's depth is a multiple of this.
      expansion_transform: ``fn(expansion_tensor=, input_tensor=)`` applied after
        the depthwise convolution (v3: squeeze-excite).
      depthwise_location: where the depthwise convolution goes: ``"expansion"``,
        ``"input"``, ``"output"`` or None (no depthwise convolution).
      depthwise_channel_multiplier: depthwise outputs per input channel.
      endpoints: if given, receives ``expansion_output``, ``depthwise_output``
        and ``projection_output`` (when built).
      use_explicit_padding: pad explicitly and convolve with VALID padding.
      padding: padding of the depthwise convolution without explicit padding.
      inner_activation_fn: activation of the inner convolutions (None: the arg scope's).
      depthwise_activation_fn: activation of the depthwise convolution only
        (precedes ``inner_activation_fn``).
      project_activation_fn: activation of the projection (linear by default).
      depthwise_fn: the depthwise convolution function.
      expansion_fn: the expansion function; splitting applies to ``split_conv`` only.
      projection_fn: the projection function; splitting applies to ``split_conv`` only.
      scope: variable scope (default ``expanded_conv``, numbered by slim).

    Returns:
      The block output, a tensor of depth ``num_outputs`` named ``output``.

    Raises:
      TypeError: unknown ``depthwise_location``, or explicit padding with a padding other than SAME.
    """
    if depthwise_location not in DEPTHWISE_LOCATIONS:
        raise TypeError(f"{depthwise_location!r} is unknown value for depthwise_location; use one of "
                        f"{DEPTHWISE_LOCATIONS}.")
    if use_explicit_padding:
        if padding != "SAME":
            raise TypeError('`use_explicit_padding` should only be used with "SAME" padding.')
        padding = "VALID"
    conv_defaults = {} if inner_activation_fn is None else {"activation_fn": inner_activation_fn}
    depthwise_defaults = dict(conv_defaults)
    if depthwise_activation_fn is not None:
        depthwise_defaults["activation_fn"] = depthwise_activation_fn
    taps = {} if endpoints is None else endpoints

    def depthwise(net: tf.Tensor, **overrides) -> tf.Tensor:
        if use_explicit_padding:
            net = fixed_padding(net, kernel_size, rate)
        net = depthwise_fn(
            net, num_outputs=None, kernel_size=kernel_size, depth_multiplier=depthwise_channel_multiplier,
            stride=stride, rate=rate, normalizer_fn=normalizer_fn, padding=padding, scope="depthwise", **overrides,
        )
        taps["depthwise_output"] = tf.identity(net, name="depthwise_output")
        return taps["depthwise_output"]

    with tf.compat.v1.variable_scope(scope, default_name="expanded_conv") as block_scope, tf.compat.v1.name_scope(
        block_scope.original_name_scope
    ), slim.arg_scope([slim.conv2d], **conv_defaults), slim.arg_scope([slim.separable_conv2d], **depthwise_defaults):
        input_depth = input_tensor.shape.as_list()[3]
        input_tensor = tf.identity(input_tensor, "input")
        net = input_tensor
        if depthwise_location == "input":
            net = depthwise(net, activation_fn=None)
        inner_size = expansion_size(num_inputs=input_depth) if callable(expansion_size) else expansion_size
        if inner_size > net.shape[3]:
            expand = _split_or_custom(expansion_fn, split_expansion, split_divisible_by)
            net = expand(net, inner_size, scope="expand", normalizer_fn=normalizer_fn)
            taps["expansion_output"] = net = tf.identity(net, "expansion_output")
        if depthwise_location == "expansion":
            net = depthwise(net)
        if expansion_transform:
            net = expansion_transform(expansion_tensor=net, input_tensor=input_tensor)
        project = _split_or_custom(projection_fn, split_projection, split_divisible_by)
        net = project(net, num_outputs, scope="project", normalizer_fn=normalizer_fn,
                      activation_fn=project_activation_fn)
        taps["projection_output"] = net
        if depthwise_location == "output":
            net = depthwise(net, activation_fn=None)
        if callable(residual):
            net = residual(input_tensor=input_tensor, output_tensor=net)
        elif residual and stride == 1 and net.shape.as_list()[3] == input_tensor.shape.as_list()[3]:
            net += input_tensor
        return tf.identity(net, name="output")


@slim.add_arg_scope
def squeeze_excite(
    input_tensor: tf.Tensor,
    divisible_by: int = 8,
    squeeze_factor: float = 3,
    inner_activation_fn: Callable = tf.nn.relu,
    gating_fn: Callable = tf.sigmoid,
    squeeze_input_tensor: Optional[tf.Tensor] = None,
    pool: Optional[int] = None,
) -> tf.Tensor:
    """Reweight the channels of ``input_tensor`` by a gate computed from pooled features (scope ``squeeze_excite``).

    The gate is an average pool, a 1x1 convolution down to
    ``depth / squeeze_factor`` channels (rounded to ``divisible_by``) with
    ``inner_activation_fn``, and a 1x1 convolution back to the input depth with
    ``gating_fn``; both have biases and no normalizer.

    Args:
      input_tensor: the tensor to gate.
      divisible_by: the inner depth is a multiple of this.
      squeeze_factor: inner depth = pooled depth / ``squeeze_factor``.
      inner_activation_fn: activation of the inner convolution.
      gating_fn: activation of the gate.
      squeeze_input_tensor: compute the gate from this tensor instead of ``input_tensor``.
      pool: pool with this window and stride (when the input is at least that
        tall) and resize the gate back bilinearly, instead of a global pool.

    Returns:
      ``input_tensor * gate``.
    """
    with tf.compat.v1.variable_scope("squeeze_excite"):
        source = input_tensor if squeeze_input_tensor is None else squeeze_input_tensor
        window = None
        if pool is not None and source.shape.as_list()[1] is not None and source.shape.as_list()[1] >= pool:
            window = (pool, pool)
        pooled = average_pool(source, tf.nn.avg_pool2d, window, stride=pool if window else 1)
        squeeze_depth = make_divisible(source.shape.as_list()[3] / squeeze_factor, divisor=divisible_by)
        squeezed = slim.conv2d(pooled, kernel_size=(1, 1), num_outputs=squeeze_depth, normalizer_fn=None,
                               activation_fn=inner_activation_fn)
        gate = slim.conv2d(squeezed, num_outputs=input_tensor.shape.as_list()[3], kernel_size=[1, 1],
                           normalizer_fn=None, activation_fn=gating_fn)
        if pool is not None:
            gate = tf.compat.v1.image.resize_bilinear(gate, input_tensor.shape.as_list()[1:3], align_corners=True)
        return input_tensor * gate
