"""I3D, the Inflated 3-D ConvNet (Carreira & Zisserman, 2017, RGB stream), with the official scopes
(``nets/i3d.py``).

Inception v1 inflated to video: a 7x7x7 stem and full 3x3x3 convolutions from
``Conv2d_2c_3x3`` on, no gating. Input: [batch, frames, 224, 224, 3].
"""

from typing import Callable, Optional, Tuple

import tensorflow as tf
import tf_slim as slim

from nets import i3d_utils
from nets._impl.initializers import trunc_normal  # noqa: F401 (the official module's name)
from nets._impl.video_inception import (
    BodyOptions,
    EndPoints,
    HeadOptions,
    inception_v1_3d_base,
    video_arg_scope,
    video_classifier,
)

conv3d_spatiotemporal = i3d_utils.conv3d_spatiotemporal


def _i3d_options(final_endpoint: str) -> BodyOptions:
    """I3D's body: a 7-frame stem, 3x3x3 convolutions from Conv2d_2c_3x3 on, no gating."""
    return BodyOptions(
        first_temporal_kernel_size=7,
        temporal_conv_startat="Conv2d_2c_3x3",
        gating_startat=None,
        final_endpoint=final_endpoint,
    )


def i3d_arg_scope(
    weight_decay: float = 1e-7,
    batch_norm_decay: float = 0.999,
    batch_norm_epsilon: float = 0.001,
    use_renorm: bool = False,
    separable_conv3d: bool = False,
) -> dict:
    """Official I3D defaults (ReLU, unfused batch norm, L2 on 3-D kernels).

    Args:
        weight_decay: L2 regularization strength.
        batch_norm_decay: decay of the batch-norm moving averages.
        batch_norm_epsilon: added to the variance to avoid division by zero.
        use_renorm: batch renormalization.
        separable_conv3d: split 3x3x3 convolutions into 1x3x3 and 3x1x1, as S3D does.
    """
    return video_arg_scope(weight_decay, batch_norm_decay, batch_norm_epsilon, use_renorm, separable_conv3d)


def i3d_base(
    inputs: tf.Tensor, final_endpoint: str = "Mixed_5c", scope: str = "InceptionV1"
) -> Tuple[tf.Tensor, EndPoints]:
    """Build the I3D body on a clip [batch, frames, height, width, channels] up to ``final_endpoint``.

    Returns:
        ``(net, end_points)``.

    Raises:
        ValueError: on a bad ``final_endpoint`` or non-5-D ``inputs``.
    """
    return inception_v1_3d_base(inputs, _i3d_options(final_endpoint), scope=scope)


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
    head = HeadOptions(num_classes, dropout_keep_prob, is_training, prediction_fn, spatial_squeeze, reuse, scope)
    return video_classifier(inputs, head, _i3d_options("Mixed_5c"))


i3d.default_image_size = 224
