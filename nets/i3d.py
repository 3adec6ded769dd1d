"""I3D, the Inflated 3-D ConvNet (Carreira & Zisserman, 2017, RGB stream), with the official scopes.

Inception v1 inflated to video: a 7x7x7 stem and full 3x3x3 convolutions from
``Conv2d_2c_3x3`` on, no gating. Input: [batch, frames, 224, 224, 3].
"""

from typing import Callable, Optional, Tuple

import tensorflow as tf
import tf_slim as slim

from nets.i3d_blocks import EndPoints, video_arg_scope, video_classifier


def i3d(
    inputs: tf.Tensor,
    num_classes: int = 1000,
    dropout_keep_prob: float = 0.8,
    is_training: bool = True,
    prediction_fn: Callable[..., tf.Tensor] = slim.softmax,
    spatial_squeeze: bool = True,
    reuse: Optional[bool] = None,
    scope: str = "InceptionV1",
) -> Tuple[tf.Tensor, EndPoints]:
    """Build I3D on a video clip ``inputs`` [batch, frames, height, width, 3]; return ``(logits, end_points)``.

    Use it under ``i3d_arg_scope()``. Logits are averaged over the remaining
    time steps, so any clip length that survives the 8x temporal downsampling works.
    """
    return video_classifier(
        inputs,
        num_classes=num_classes,
        dropout_keep_prob=dropout_keep_prob,
        is_training=is_training,
        prediction_fn=prediction_fn,
        spatial_squeeze=spatial_squeeze,
        reuse=reuse,
        scope=scope,
        first_temporal_kernel_size=7,
        temporal_conv_startat="Conv2d_2c_3x3",
        gating_startat=None,
    )


i3d.default_image_size = 224


def i3d_arg_scope(
    weight_decay: float = 1e-7,
    batch_norm_decay: float = 0.999,
    batch_norm_epsilon: float = 0.001,
    use_renorm: bool = False,
    separable_conv3d: bool = False,
) -> dict:
    """Official I3D defaults; ``separable_conv3d=True`` splits 3x3x3 convolutions as S3D does."""
    return video_arg_scope(weight_decay, batch_norm_decay, batch_norm_epsilon, use_renorm, separable_conv3d)
