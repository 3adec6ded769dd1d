"""MobileNet v2 (Sandler et al., 2018, https://arxiv.org/abs/1801.04381) as an official conv def.

``V2_DEF`` is a 3x3 stem, 17 ``expanded_conv`` blocks with ReLU6 and linear
bottlenecks (Table 2 of the paper) and a 1x1 convolution to 1280 channels; the
batch-norm and activation choices live in its ``defaults``, so a copy with
edited ``defaults``/``spec`` builds a different network. ``mobilenet`` builds it
(scope ``MobilenetV2``) through ``nets.mobilenet.mobilenet.mobilenet``.
"""

import copy
from typing import Callable, Optional, Tuple

import tensorflow as tf
import tf_slim as slim

from nets._impl.mobilenet_layers import reject_generic_multiplier, wrapped_partial
from nets.mobilenet import conv_blocks as ops
from nets.mobilenet import mobilenet as lib

op = lib.op
expand_input = ops.expand_input_by_factor

# (output depth, first stride, repeats) of the 16 blocks after the first, all with expansion 6.
_BLOCK_STAGES = ((24, 2, 2), (32, 2, 3), (64, 2, 4), (96, 1, 3), (160, 2, 3), (320, 1, 1))
_CONV_LAYERS = (slim.conv2d, slim.fully_connected, slim.separable_conv2d)


def _v2_spec() -> list:
    """The 19 layers of MobileNet v2: stem, the unexpanded first block, 16 expanded blocks, last 1x1 conv."""
    layers = [
        op(slim.conv2d, stride=2, num_outputs=32, kernel_size=[3, 3]),
        op(ops.expanded_conv, expansion_size=expand_input(1, divisible_by=1), num_outputs=16),
    ]
    for depth, first_stride, repeats in _BLOCK_STAGES:
        for repeat in range(repeats):
            layers.append(op(ops.expanded_conv, stride=first_stride if repeat == 0 else 1, num_outputs=depth))
    layers.append(op(slim.conv2d, stride=1, kernel_size=[1, 1], num_outputs=1280))
    return layers


def _v2_defaults(normalizer_fn: Callable) -> dict:
    """The conv-def defaults of MobileNet v2 with ``normalizer_fn`` after every convolution."""
    defaults = {
        _CONV_LAYERS: {"normalizer_fn": normalizer_fn, "activation_fn": tf.nn.relu6},
        (ops.expanded_conv,): {
            "expansion_size": expand_input(6),
            "split_expansion": 1,
            "normalizer_fn": normalizer_fn,
            "residual": True,
        },
        (slim.conv2d, slim.separable_conv2d): {"padding": "SAME"},
    }
    if normalizer_fn is slim.batch_norm:
        # Part of the architecture (the checkpoints have beta and gamma), hence here and not in training_scope.
        defaults = {(slim.batch_norm,): {"center": True, "scale": True}, **defaults}
    return defaults


V2_DEF = dict(defaults=_v2_defaults(slim.batch_norm), spec=_v2_spec())

V2_DEF_GROUP_NORM = dict(defaults=_v2_defaults(slim.group_norm), spec=_v2_spec())


@slim.add_arg_scope
def mobilenet(
    input_tensor: tf.Tensor,
    num_classes: Optional[int] = 1001,
    depth_multiplier: float = 1.0,
    scope: str = "MobilenetV2",
    conv_defs: Optional[dict] = None,
    finegrain_classification_mode: bool = False,
    min_depth: Optional[int] = None,
    divisible_by: Optional[int] = None,
    activation_fn: Optional[Callable] = None,
    **kwargs,
) -> Tuple[tf.Tensor, dict]:
    """Build MobileNet v2 (inference mode unless under ``training_scope()``); return ``(logits, end_points)``.

    Args:
      input_tensor: [batch, height, width, channels] input.
      num_classes: classes; 0 or None returns the pooled features.
      depth_multiplier: scales every layer's depth (official rounding).
      scope: variable scope.
      conv_defs: the conv def to build (default ``V2_DEF``).
      finegrain_classification_mode: keep the last layer at full depth when
        ``depth_multiplier`` < 1 (better for ImageNet-like tasks).
      min_depth: if given, no layer gets fewer channels.
      divisible_by: if given, every depth is a multiple of it.
      activation_fn: if given, replaces ReLU6 in every convolution.
      **kwargs: passed to ``nets.mobilenet.mobilenet.mobilenet`` (``prediction_fn``,
        ``reuse``, ``base_only``, ``is_training``, ``final_endpoint``, ``output_stride``, ...).

    Returns:
      ``(logits, end_points)``.

    Raises:
      ValueError: ``multiplier`` passed instead of ``depth_multiplier``.
    """
    if conv_defs is None:
        conv_defs = V2_DEF
    reject_generic_multiplier(kwargs, "mobilenetv2")
    if finegrain_classification_mode and depth_multiplier < 1:
        conv_defs = copy.deepcopy(conv_defs)
        conv_defs["spec"][-1].params["num_outputs"] /= depth_multiplier
    if activation_fn:
        conv_defs = copy.deepcopy(conv_defs)
        conv_defs["defaults"][_CONV_LAYERS]["activation_fn"] = activation_fn
    # Only the given values are set, so an enclosing arg scope on depth_multiplier keeps its own.
    depth_args = {name: value for name, value in (("min_depth", min_depth), ("divisible_by", divisible_by))
                  if value is not None}
    with slim.arg_scope((lib.depth_multiplier,), **depth_args):
        return lib.mobilenet(
            input_tensor, num_classes=num_classes, conv_defs=conv_defs, scope=scope, multiplier=depth_multiplier,
            **kwargs,
        )


mobilenet.default_image_size = 224


# Width variants; below 1.0 the last layer keeps its 1280 channels (finegrain classification mode).
mobilenet_v2_140 = wrapped_partial(mobilenet, depth_multiplier=1.4)
mobilenet_v2_050 = wrapped_partial(mobilenet, depth_multiplier=0.50, finegrain_classification_mode=True)
mobilenet_v2_035 = wrapped_partial(mobilenet, depth_multiplier=0.35, finegrain_classification_mode=True)


@slim.add_arg_scope
def mobilenet_base(input_tensor: tf.Tensor, depth_multiplier: float = 1.0, **kwargs) -> Tuple[tf.Tensor, dict]:
    """The MobileNet v2 body without pooling and logits; ``kwargs`` as for ``mobilenet``."""
    return mobilenet(input_tensor, depth_multiplier=depth_multiplier, base_only=True, **kwargs)


@slim.add_arg_scope
def mobilenet_base_group_norm(
    input_tensor: tf.Tensor, depth_multiplier: float = 1.0, **kwargs
) -> Tuple[tf.Tensor, dict]:
    """The MobileNet v2 body with group norm (``groups`` keyword, default 8) instead of batch norm."""
    conv_defs = copy.deepcopy(V2_DEF_GROUP_NORM)
    conv_defs["defaults"][(slim.group_norm,)] = {"groups": kwargs.pop("groups", 8)}
    kwargs["conv_defs"] = conv_defs
    return mobilenet(input_tensor, depth_multiplier=depth_multiplier, base_only=True, **kwargs)


def training_scope(**kwargs) -> dict:
    """The MobileNet v2 training arg scope: ``nets.mobilenet.mobilenet.training_scope(**kwargs)``.

    Args:
      **kwargs: ``is_training``, ``weight_decay``, ``stddev``, ``dropout_keep_prob``, ``bn_decay``.

    Returns:
      The arg scope dict.
    """
    return lib.training_scope(**kwargs)


__all__ = ["training_scope", "mobilenet_base", "mobilenet", "V2_DEF"]
