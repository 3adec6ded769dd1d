"""S3D-G, the gated separable 3-D ConvNet (Xie et al., 2018), with the official ``InceptionV1`` scopes.

Inception v1 inflated to video with each 3x3x3 convolution split into a
1x3x3 spatial and a 3x1x1 temporal convolution, plus self-gating of the
feature maps. Input: [batch, frames, 224, 224, 3].
"""

from typing import Callable, Optional, Tuple

import tensorflow as tf
import tf_slim as slim

from nets.i3d_blocks import EndPoints, video_arg_scope, video_classifier


def s3dg(
    inputs: tf.Tensor,
    num_classes: int = 1000,
    first_temporal_kernel_size: int = 3,
    temporal_conv_startat: Optional[str] = "Conv2d_2c_3x3",
    gating_startat: Optional[str] = "Conv2d_2c_3x3",
    final_endpoint: str = "Mixed_5c",
    min_depth: int = 16,
    depth_multiplier: float = 1.0,
    dropout_keep_prob: float = 0.8,
    is_training: bool = True,
    prediction_fn: Callable[..., tf.Tensor] = slim.softmax,
    spatial_squeeze: bool = True,
    reuse: Optional[bool] = None,
    scope: str = "InceptionV1",
) -> Tuple[tf.Tensor, EndPoints]:
    """Build S3D-G on a video clip ``inputs`` [batch, frames, height, width, 3]; return ``(logits, end_points)``.

    Use it under ``s3dg_arg_scope()`` (which makes the 3x3 convolutions
    separable). ``temporal_conv_startat`` / ``gating_startat`` name the first
    block with temporal convolutions / gating (None: nowhere), which gives the
    paper's "bottom-heavy" and "top-heavy" variants.
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
        first_temporal_kernel_size=first_temporal_kernel_size,
        temporal_conv_startat=temporal_conv_startat,
        gating_startat=gating_startat,
        final_endpoint=final_endpoint,
        min_depth=min_depth,
        depth_multiplier=depth_multiplier,
    )


s3dg.default_image_size = 224


def s3dg_arg_scope(
    weight_decay: float = 1e-7,
    batch_norm_decay: float = 0.999,
    batch_norm_epsilon: float = 0.001,
) -> dict:
    """Official S3D-G defaults: the I3D ones with separable spatio-temporal convolutions."""
    return video_arg_scope(weight_decay, batch_norm_decay, batch_norm_epsilon, use_renorm=False, separable_conv3d=True)
