"""VGG A/16/19 (Simonyan & Zisserman 2014) from tf_slim, with the zoo's ``Predictions`` end point.

tf_slim's definitions already create the official variables; this module only
adds the softmax end point and re-exports the arg_scope.
"""

from typing import Callable

import tensorflow as tf
from tf_slim.nets import vgg as _slim_vgg

from nets.slim_adapters import add_predictions, require_num_classes

vgg_arg_scope = _slim_vgg.vgg_arg_scope

DEFAULT_IMAGE_SIZE = 224


def _classify(
    slim_fn: Callable,
    inputs: tf.Tensor,
    num_classes: int,
    is_training: bool,
    dropout_keep_prob: float,
    spatial_squeeze: bool,
    scope: str,
) -> tuple:
    """Run one tf_slim VGG and add ``Predictions``."""
    require_num_classes(num_classes, scope)
    logits, end_points = slim_fn(inputs, num_classes, is_training, dropout_keep_prob, spatial_squeeze, scope)
    return logits, add_predictions(logits, end_points)


def vgg_a(
    inputs: tf.Tensor,
    num_classes: int = 1000,
    is_training: bool = True,
    dropout_keep_prob: float = 0.5,
    spatial_squeeze: bool = True,
    scope: str = "vgg_a",
) -> tuple:
    """VGG-11 (configuration A): returns ``(logits, end_points)``."""
    return _classify(_slim_vgg.vgg_a, inputs, num_classes, is_training, dropout_keep_prob, spatial_squeeze, scope)


def vgg_16(
    inputs: tf.Tensor,
    num_classes: int = 1000,
    is_training: bool = True,
    dropout_keep_prob: float = 0.5,
    spatial_squeeze: bool = True,
    scope: str = "vgg_16",
) -> tuple:
    """VGG-16 (configuration D): returns ``(logits, end_points)``."""
    return _classify(_slim_vgg.vgg_16, inputs, num_classes, is_training, dropout_keep_prob, spatial_squeeze, scope)


def vgg_19(
    inputs: tf.Tensor,
    num_classes: int = 1000,
    is_training: bool = True,
    dropout_keep_prob: float = 0.5,
    spatial_squeeze: bool = True,
    scope: str = "vgg_19",
) -> tuple:
    """VGG-19 (configuration E): returns ``(logits, end_points)``."""
    return _classify(_slim_vgg.vgg_19, inputs, num_classes, is_training, dropout_keep_prob, spatial_squeeze, scope)


vgg_a.default_image_size = DEFAULT_IMAGE_SIZE
vgg_16.default_image_size = DEFAULT_IMAGE_SIZE
vgg_19.default_image_size = DEFAULT_IMAGE_SIZE
