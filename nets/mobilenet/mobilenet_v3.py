"""MobileNet v3 (Howard et al., 2019) and MobileNet-EdgeTPU as official conv defs.

v3 adds squeeze-excite gates (``expansion_transform`` of ``expanded_conv``),
5x5 depthwise kernels and hard-swish to the v2 block, and ends with an average
pool to 1x1 followed by a 1x1 convolution without normalizer. The
"minimalistic" defs drop squeeze-excite, hard-swish and 5x5 kernels.
``V3_EDGETPU`` (scope ``MobilenetEdgeTPU``) uses ReLU only and "fused" blocks
(one full 3x3 expansion convolution instead of 1x1 + depthwise) in its early
stages, which run faster on the Edge TPU.
"""

import copy
import functools
from typing import Callable, Optional, Tuple

import numpy as np
import tensorflow as tf
import tf_slim as slim

from nets._impl.mobilenet_layers import reject_generic_multiplier
from nets.mobilenet import conv_blocks as ops
from nets.mobilenet import mobilenet as lib

op = lib.op
expand_input = ops.expand_input_by_factor

# The official squeeze-excite gate multiplies by this literal, not by exactly 1/6 (its hard-swish does use
# 1/6). The pretrained checkpoints were trained with it, so the gate keeps it.
SQUEEZE_EXCITE_GATE_SCALE = 0.16667


def _hard_sigmoid_gate(x: tf.Tensor) -> tf.Tensor:
    """The v3 squeeze-excite gate, ``relu6(x + 3) * 0.16667`` (the official constant)."""
    return tf.nn.relu6(x + 3) * SQUEEZE_EXCITE_GATE_SCALE


# Squeeze-excite with the v3 settings: inner depth / 4, ReLU inside, hard-sigmoid gate.
squeeze_excite = functools.partial(
    ops.squeeze_excite, squeeze_factor=4, inner_activation_fn=tf.nn.relu, gating_fn=_hard_sigmoid_gate
)


def _se4(expansion_tensor: tf.Tensor, input_tensor: tf.Tensor) -> tf.Tensor:
    """``squeeze_excite`` as an ``expansion_transform`` (it gates the depthwise output; the input is unused)."""
    return squeeze_excite(expansion_tensor)


def hard_swish(x: tf.Tensor) -> tf.Tensor:
    """``x * relu6(x + 3) / 6`` (scope ``hard_swish``), multiplied in the official order so float32 rounding matches."""
    with tf.compat.v1.name_scope("hard_swish"):
        return x * tf.nn.relu6(x + np.float32(3)) * np.float32(1.0 / 6.0)


def reduce_to_1x1(input_tensor: tf.Tensor, default_size: int = 7, **kwargs) -> tf.Tensor:
    """Average-pool a square map to 1x1 (a ``default_size`` window when the map is not square or unknown).

    ``kwargs`` go to ``slim.avg_pool2d`` (the conv def passes ``stride`` and ``padding``).
    """
    height, width = input_tensor.shape.as_list()[1:3]
    size = height if height is not None and width == height else default_size
    return slim.avg_pool2d(input_tensor, kernel_size=[size, size], **kwargs)


def mbv3_op(
    ef: float, n: int, k: int, s: int = 1, act: Callable = tf.nn.relu, se: Optional[Callable] = None, **kwargs
) -> lib._Op:
    """One v3 block: expansion factor ``ef``, ``n`` outputs, ``k``x``k`` depthwise, stride ``s``, activation
    ``act``, optional ``se`` transform; ``kwargs`` go to ``expanded_conv``.
    """
    return op(
        ops.expanded_conv, expansion_size=expand_input(ef), kernel_size=(k, k), stride=s, num_outputs=n,
        inner_activation_fn=act, expansion_transform=se, **kwargs,
    )


def mbv3_fused(ef: float, n: int, k: int, s: int = 1, **kwargs) -> lib._Op:
    """One fused (EdgeTPU) block: a full ``k``x``k`` expansion convolution with stride ``s``, no depthwise."""
    expansion_fn = functools.partial(slim.conv2d, kernel_size=k, stride=s)
    return mbv3_op(ef, n, k=1, s=s, depthwise_location=None, expansion_fn=expansion_fn, **kwargs)


mbv3_op_se = functools.partial(mbv3_op, se=_se4)


def _defaults(normalizer_fn: Callable) -> dict:
    """The conv-def defaults of every v3 def: ``normalizer_fn`` after each convolution, ReLU, residuals."""
    defaults = {
        (ops.expanded_conv,): dict(normalizer_fn=normalizer_fn, residual=True),
        (slim.conv2d, slim.fully_connected, slim.separable_conv2d): {
            "normalizer_fn": normalizer_fn,
            "activation_fn": tf.nn.relu,
        },
    }
    if normalizer_fn is slim.batch_norm:
        defaults[(slim.batch_norm,)] = {"center": True, "scale": True}
    else:
        defaults[(slim.group_norm,)] = {"groups": 8}
    return defaults


DEFAULTS = _defaults(slim.batch_norm)
DEFAULTS_GROUP_NORM = _defaults(slim.group_norm)


def _head(last_depth: int, head_depth: int, activation: Optional[Callable]) -> list:
    """The v3 head inside the body: 1x1 conv to ``last_depth``, pool to 1x1, 1x1 conv without normalizer."""
    activation_args = {} if activation is None else {"activation_fn": activation}
    return [
        op(slim.conv2d, stride=1, kernel_size=[1, 1], num_outputs=last_depth, **activation_args),
        op(reduce_to_1x1, default_size=7, stride=1, padding="VALID"),
        op(slim.conv2d, stride=1, kernel_size=[1, 1], num_outputs=head_depth, normalizer_fn=None, **activation_args),
    ]


def _stem(depth: int, activation: Optional[Callable]) -> list:
    """The 3x3 stride-2 stem convolution."""
    activation_args = {} if activation is None else {"activation_fn": activation}
    return [op(slim.conv2d, stride=2, num_outputs=depth, kernel_size=(3, 3), **activation_args)]


V3_LARGE = dict(
    defaults=dict(DEFAULTS),
    spec=_stem(16, hard_swish) + [
        mbv3_op(ef=1, n=16, k=3),
        mbv3_op(ef=4, n=24, k=3, s=2),
        mbv3_op(ef=3, n=24, k=3, s=1),
        mbv3_op_se(ef=3, n=40, k=5, s=2),
        mbv3_op_se(ef=3, n=40, k=5, s=1),
        mbv3_op_se(ef=3, n=40, k=5, s=1),
        mbv3_op(ef=6, n=80, k=3, s=2, act=hard_swish),
        mbv3_op(ef=2.5, n=80, k=3, s=1, act=hard_swish),
        mbv3_op(ef=184 / 80.0, n=80, k=3, s=1, act=hard_swish),
        mbv3_op(ef=184 / 80.0, n=80, k=3, s=1, act=hard_swish),
        mbv3_op_se(ef=6, n=112, k=3, s=1, act=hard_swish),
        mbv3_op_se(ef=6, n=112, k=3, s=1, act=hard_swish),
        mbv3_op_se(ef=6, n=160, k=5, s=2, act=hard_swish),
        mbv3_op_se(ef=6, n=160, k=5, s=1, act=hard_swish),
        mbv3_op_se(ef=6, n=160, k=5, s=1, act=hard_swish),
    ] + _head(960, 1280, hard_swish),
)

V3_SMALL = dict(
    defaults=dict(DEFAULTS),
    spec=_stem(16, hard_swish) + [
        mbv3_op_se(ef=1, n=16, k=3, s=2),
        mbv3_op(ef=72.0 / 16, n=24, k=3, s=2),
        mbv3_op(ef=88.0 / 24, n=24, k=3, s=1),
        mbv3_op_se(ef=4, n=40, k=5, s=2, act=hard_swish),
        mbv3_op_se(ef=6, n=40, k=5, s=1, act=hard_swish),
        mbv3_op_se(ef=6, n=40, k=5, s=1, act=hard_swish),
        mbv3_op_se(ef=3, n=48, k=5, s=1, act=hard_swish),
        mbv3_op_se(ef=3, n=48, k=5, s=1, act=hard_swish),
        mbv3_op_se(ef=6, n=96, k=5, s=2, act=hard_swish),
        mbv3_op_se(ef=6, n=96, k=5, s=1, act=hard_swish),
        mbv3_op_se(ef=6, n=96, k=5, s=1, act=hard_swish),
    ] + _head(576, 1024, hard_swish),
)


def _minimalistic(conv_defs: dict) -> dict:
    """The "minimalistic" form of a v3 def: ReLU everywhere, no squeeze-excite, 3x3 depthwise kernels."""
    simplified = copy.deepcopy(conv_defs)
    for layer in simplified["spec"]:
        if layer.op is ops.expanded_conv:
            layer.params.update(kernel_size=(3, 3), inner_activation_fn=tf.nn.relu, expansion_transform=None)
        else:
            layer.params.pop("activation_fn", None)  # the defaults' ReLU
    return simplified


V3_LARGE_MINIMALISTIC = _minimalistic(V3_LARGE)
V3_SMALL_MINIMALISTIC = _minimalistic(V3_SMALL)


V3_EDGETPU = dict(
    defaults=dict(DEFAULTS),
    spec=_stem(32, None) + [
        mbv3_fused(k=3, s=1, ef=1, n=16),
        mbv3_fused(k=3, s=2, ef=8, n=32),
        mbv3_fused(k=3, s=1, ef=4, n=32),
        mbv3_fused(k=3, s=1, ef=4, n=32),
        mbv3_fused(k=3, s=1, ef=4, n=32),
        mbv3_fused(k=3, s=2, ef=8, n=48),
        mbv3_fused(k=3, s=1, ef=4, n=48),
        mbv3_fused(k=3, s=1, ef=4, n=48),
        mbv3_fused(k=3, s=1, ef=4, n=48),
        mbv3_op(k=3, s=2, ef=8, n=96),
        mbv3_op(k=3, s=1, ef=4, n=96),
        mbv3_op(k=3, s=1, ef=4, n=96),
        mbv3_op(k=3, s=1, ef=4, n=96),
        mbv3_op(k=3, s=1, ef=8, n=96, residual=False),
        mbv3_op(k=3, s=1, ef=4, n=96),
        mbv3_op(k=3, s=1, ef=4, n=96),
        mbv3_op(k=3, s=1, ef=4, n=96),
        mbv3_op(k=5, s=2, ef=8, n=160),
        mbv3_op(k=5, s=1, ef=4, n=160),
        mbv3_op(k=5, s=1, ef=4, n=160),
        mbv3_op(k=5, s=1, ef=4, n=160),
        mbv3_op(k=3, s=1, ef=8, n=192),
        op(slim.conv2d, stride=1, num_outputs=1280, kernel_size=(1, 1)),
    ],
)


def _keep_depth(params: dict, multiplier: float) -> dict:
    """A ``multiplier_func`` that leaves the layer's depth unscaled."""
    return params


@slim.add_arg_scope
def mobilenet(
    input_tensor: tf.Tensor,
    num_classes: Optional[int] = 1001,
    depth_multiplier: float = 1.0,
    scope: str = "MobilenetV3",
    conv_defs: Optional[dict] = None,
    finegrain_classification_mode: bool = False,
    use_groupnorm: bool = False,
    **kwargs,
) -> Tuple[tf.Tensor, dict]:
    """Creates mobilenet V3 network.

    Inference mode is created by default. To create training use training_scope
    below: ``with slim.arg_scope(mobilenet_v3.training_scope()): mobilenet_v3.mobilenet(...)``.

    Args:
      input_tensor: [batch, height, width, channels] input.
      num_classes: classes; 0 or None returns the pooled features.
      depth_multiplier: scales every layer's depth (official rounding).
      scope: variable scope.
      conv_defs: the conv def to build (default ``V3_LARGE``).
      finegrain_classification_mode: keep the last layer at its full depth
        whatever the multiplier.
      use_groupnorm: group norm (``groups`` keyword, default 8) instead of batch norm.
      **kwargs: passed to ``nets.mobilenet.mobilenet.mobilenet`` (``prediction_fn``,
        ``reuse``, ``base_only``, ``is_training``, ``final_endpoint``, ...).

    Returns:
      ``(logits, end_points)``.

    Raises:
      ValueError: ``multiplier`` passed instead of ``depth_multiplier``.
    """
    if conv_defs is None:
        conv_defs = V3_LARGE
    reject_generic_multiplier(kwargs, "mobilenetv3")
    if finegrain_classification_mode:
        conv_defs = copy.deepcopy(conv_defs)
        conv_defs["spec"][-1] = conv_defs["spec"][-1]._replace(multiplier_func=_keep_depth)
    if use_groupnorm:
        conv_defs = copy.deepcopy(conv_defs)
        conv_defs["defaults"] = dict(DEFAULTS_GROUP_NORM)
        conv_defs["defaults"][(slim.group_norm,)] = {"groups": kwargs.pop("groups", 8)}
    return lib.mobilenet(
        input_tensor, num_classes=num_classes, conv_defs=conv_defs, scope=scope, multiplier=depth_multiplier,
        **kwargs,
    )


mobilenet.default_image_size = 224
training_scope = lib.training_scope


@slim.add_arg_scope
def mobilenet_base(input_tensor: tf.Tensor, depth_multiplier: float = 1.0, **kwargs) -> Tuple[tf.Tensor, dict]:
    """The MobileNet v3 body without the classifier; ``kwargs`` as for ``mobilenet``."""
    return mobilenet(input_tensor, depth_multiplier=depth_multiplier, base_only=True, **kwargs)


def wrapped_partial(func: Callable, new_defaults: Optional[dict] = None, **kwargs) -> Callable:
    """``func`` with fixed ``kwargs`` and overridable ``new_defaults``, keeping its name, docstring and attributes."""
    defaults = dict(new_defaults or {})

    def with_defaults(*args, **call_kwargs):
        return func(*args, **{**defaults, **call_kwargs})

    functools.update_wrapper(with_defaults, func)
    partial_func = functools.partial(with_defaults, **kwargs)
    functools.update_wrapper(partial_func, func)
    return partial_func


large = wrapped_partial(mobilenet, conv_defs=V3_LARGE)
small = wrapped_partial(mobilenet, conv_defs=V3_SMALL)
edge_tpu = wrapped_partial(mobilenet, new_defaults={"scope": "MobilenetEdgeTPU"}, conv_defs=V3_EDGETPU)
edge_tpu_075 = wrapped_partial(
    mobilenet,
    new_defaults={"scope": "MobilenetEdgeTPU"},
    conv_defs=V3_EDGETPU,
    depth_multiplier=0.75,
    finegrain_classification_mode=True,
)
# Without squeeze-excite, hard-swish or 5x5 depthwise kernels: friendly to a wide range of hardware.
large_minimalistic = wrapped_partial(mobilenet, conv_defs=V3_LARGE_MINIMALISTIC)
small_minimalistic = wrapped_partial(mobilenet, conv_defs=V3_SMALL_MINIMALISTIC)


def _reduce_consecutive_layers(conv_defs: dict, start_id: int, end_id: int, multiplier: float = 0.5) -> dict:
    """A copy of ``conv_defs`` whose layers ``start_id``..``end_id`` (0-based, inclusive) have ``multiplier``
    times their depth (the detection variants).

    Raises:
      ValueError: one of those layers has no ``num_outputs``.
    """
    reduced = copy.deepcopy(conv_defs)
    for index, layer in enumerate(reduced["spec"][start_id:end_id + 1], start=start_id):
        if "num_outputs" not in layer.params:
            raise ValueError(f"layer {index} of the conv def has no num_outputs to reduce.")
        layer.params["num_outputs"] = int(np.round(layer.params["num_outputs"] * multiplier))
    return reduced


V3_LARGE_DETECTION = _reduce_consecutive_layers(V3_LARGE, 13, 16)
V3_SMALL_DETECTION = _reduce_consecutive_layers(V3_SMALL, 9, 12)


__all__ = ["training_scope", "mobilenet", "V3_LARGE", "V3_SMALL", "large", "small", "V3_LARGE_DETECTION",
           "V3_SMALL_DETECTION"]
