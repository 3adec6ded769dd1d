"""S3D-G, the gated separable 3-D ConvNet (Xie et al., 2018), with the official ``InceptionV1`` scopes
(``nets/s3dg.py``).

Inception v1 inflated to video with each 3x3x3 convolution split into a
1x3x3 spatial and a 3x1x1 temporal convolution, plus self-gating of the
feature maps. Input: [batch, frames, 224, 224, 3].
"""

from typing import Callable, Optional, Tuple

import tensorflow as tf
import tf_slim as slim

from nets import i3d_utils
from nets._impl import video_inception
from nets._impl.initializers import trunc_normal  # noqa: F401 (the official module's name)
from nets._impl.video_inception import BodyOptions, EndPoints, HeadOptions

conv3d_spatiotemporal = i3d_utils.conv3d_spatiotemporal
inception_block_v1_3d = i3d_utils.inception_block_v1_3d
arg_scope = slim.arg_scope
self_gating = video_inception.self_gating


def s3dg_arg_scope(
    weight_decay: float = 1e-7,
    batch_norm_decay: float = 0.999,
    batch_norm_epsilon: float = 0.001,
) -> dict:
    """Official S3D-G defaults: the I3D ones with separable spatio-temporal convolutions.

    Args:
        weight_decay: L2 regularization strength.
        batch_norm_decay: decay of the batch-norm moving averages.
        batch_norm_epsilon: added to the variance to avoid division by zero.
    """
    return video_inception.video_arg_scope(
        weight_decay, batch_norm_decay, batch_norm_epsilon, use_renorm=False, separable_conv3d=True
    )


def s3dg_base(
    inputs: tf.Tensor,
    first_temporal_kernel_size: int = 3,
    temporal_conv_startat: Optional[str] = "Conv2d_2c_3x3",
    gating_startat: Optional[str] = "Conv2d_2c_3x3",
    final_endpoint: str = "Mixed_5c",
    min_depth: int = 16,
    depth_multiplier: float = 1.0,
    data_format: str = "NDHWC",
    scope: str = "InceptionV1",
) -> Tuple[tf.Tensor, EndPoints]:
    """Build the S3D-G body up to ``final_endpoint``; return ``(net, end_points)``.

    Args:
        inputs: a clip [batch, frames, height, width, channels] (channels second for NCDHW).
        first_temporal_kernel_size: temporal extent of the stem convolution: 1, 3, 5 or 7.
        temporal_conv_startat: first block whose 3x3 convolutions span 3 frames (None: none do);
            with ``temporal_conv_startat`` / ``gating_startat`` late in the network this gives the
            paper's "bottom-heavy" variants, early ones the "top-heavy" ones.
        gating_startat: first block whose outputs are self-gated (None: no gating).
        final_endpoint: the last end point built (``Conv2d_1a_7x7`` ... ``Mixed_5c``).
        min_depth: smallest number of channels when ``depth_multiplier`` < 1.
        depth_multiplier: scales the channels of every convolution; must be positive.
        data_format: ``NDHWC`` or ``NCDHW``.
        scope: variable scope.

    Raises:
        ValueError: naming the bad argument.
    """
    options = BodyOptions(
        first_temporal_kernel_size,
        temporal_conv_startat,
        gating_startat,
        final_endpoint,
        min_depth,
        depth_multiplier,
        data_format,
    )
    return video_inception.inception_v1_3d_base(inputs, options, scope=scope)


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
    data_format: str = "NDHWC",
    scope: str = "InceptionV1",
) -> Tuple[tf.Tensor, EndPoints]:
    """Build S3D-G on a video clip ``inputs``; return ``(logits, end_points)``.

    Use it under ``s3dg_arg_scope()`` (which makes the 3x3 convolutions
    separable); the body arguments are those of ``s3dg_base``.
    """
    head = HeadOptions(num_classes, dropout_keep_prob, is_training, prediction_fn, spatial_squeeze, reuse, scope)
    body = BodyOptions(
        first_temporal_kernel_size,
        temporal_conv_startat,
        gating_startat,
        final_endpoint,
        min_depth,
        depth_multiplier,
        data_format,
    )
    return video_inception.video_classifier(inputs, head, body)


s3dg.default_image_size = 224
