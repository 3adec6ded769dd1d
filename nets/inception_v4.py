"""Inception-v4 (Szegedy et al. 2016, "Inception-v4, Inception-ResNet and the Impact of Residual
Connections on Learning"), with the variable names of the official TF-Slim checkpoint.

Layout: a stem (``Conv2d_1a_3x3`` .. ``Mixed_5a``) takes 299x299 to 35x35x384,
then 4 Inception-A blocks (``Mixed_5b..e``), Reduction-A (``Mixed_6a``, 17x17x1024),
7 Inception-B blocks (``Mixed_6b..h``), Reduction-B (``Mixed_7a``, 8x8x1536) and
3 Inception-C blocks (``Mixed_7b..d``). The auxiliary head reads ``Mixed_6h``.
"""

import contextlib
import functools
from typing import Iterator, Optional

import tensorflow as tf
import tf_slim as slim

from nets import inception_utils
from nets._impl import inception_parts


def _conv(depth: int, kernel: int, stride: int = 1, padding: str = "SAME") -> inception_parts.LayerFn:
    """A stem convolution as an end-point layer (called with ``net`` and ``scope``)."""
    return functools.partial(
        slim.conv2d, num_outputs=depth, kernel_size=[kernel, kernel], stride=stride, padding=padding
    )


@contextlib.contextmanager
def _block_scope(inputs: tf.Tensor, scope: Optional[str], default_name: str, reuse: Optional[bool]) -> Iterator[None]:
    """A block's own variable scope, with stride-1 SAME layers unless a layer says otherwise."""
    with tf.compat.v1.variable_scope(scope, default_name, [inputs], reuse=reuse):
        with slim.arg_scope([slim.conv2d, slim.avg_pool2d, slim.max_pool2d], stride=1, padding="SAME"):
            yield


def _mixed_3a(net: tf.Tensor, scope: str) -> tf.Tensor:
    """Stem split 1: 3x3/2 max pool next to a 3x3/2 conv to 96 (147x147x64 -> 73x73x160)."""
    with tf.compat.v1.variable_scope(scope):
        with tf.compat.v1.variable_scope("Branch_0"):
            pooled = slim.max_pool2d(net, [3, 3], stride=2, padding="VALID", scope="MaxPool_0a_3x3")
        with tf.compat.v1.variable_scope("Branch_1"):
            strided = slim.conv2d(net, 96, [3, 3], stride=2, padding="VALID", scope="Conv2d_0a_3x3")
        return inception_parts.concat_branches([pooled, strided])


def _mixed_4a(net: tf.Tensor, scope: str) -> tf.Tensor:
    """Stem split 2: 1x1 -> 3x3 next to 1x1 -> 1x7 -> 7x1 -> 3x3, both VALID (73x73 -> 71x71x192)."""
    with tf.compat.v1.variable_scope(scope):
        with tf.compat.v1.variable_scope("Branch_0"):
            short = slim.conv2d(net, 64, [1, 1], scope="Conv2d_0a_1x1")
            short = slim.conv2d(short, 96, [3, 3], padding="VALID", scope="Conv2d_1a_3x3")
        with tf.compat.v1.variable_scope("Branch_1"):
            factored = slim.conv2d(net, 64, [1, 1], scope="Conv2d_0a_1x1")
            factored = slim.conv2d(factored, 64, [1, 7], scope="Conv2d_0b_1x7")
            factored = slim.conv2d(factored, 64, [7, 1], scope="Conv2d_0c_7x1")
            factored = slim.conv2d(factored, 96, [3, 3], padding="VALID", scope="Conv2d_1a_3x3")
        return inception_parts.concat_branches([short, factored])


def _mixed_5a(net: tf.Tensor, scope: str) -> tf.Tensor:
    """Stem split 3: 3x3/2 conv to 192 next to 3x3/2 max pool (71x71 -> 35x35x384)."""
    with tf.compat.v1.variable_scope(scope):
        with tf.compat.v1.variable_scope("Branch_0"):
            strided = slim.conv2d(net, 192, [3, 3], stride=2, padding="VALID", scope="Conv2d_1a_3x3")
        with tf.compat.v1.variable_scope("Branch_1"):
            pooled = slim.max_pool2d(net, [3, 3], stride=2, padding="VALID", scope="MaxPool_1a_3x3")
        return inception_parts.concat_branches([strided, pooled])


def block_inception_a(inputs: tf.Tensor, scope: Optional[str] = None, reuse: Optional[bool] = None) -> tf.Tensor:
    """Inception-A block on the 35x35 grid: 1x1 / 1x1-3x3 / 1x1-3x3-3x3 / avg pool-1x1, 384 channels out."""
    with _block_scope(inputs, scope, "BlockInceptionA", reuse):
        with tf.compat.v1.variable_scope("Branch_0"):
            branch_0 = slim.conv2d(inputs, 96, [1, 1], scope="Conv2d_0a_1x1")
        with tf.compat.v1.variable_scope("Branch_1"):
            branch_1 = slim.conv2d(inputs, 64, [1, 1], scope="Conv2d_0a_1x1")
            branch_1 = slim.conv2d(branch_1, 96, [3, 3], scope="Conv2d_0b_3x3")
        with tf.compat.v1.variable_scope("Branch_2"):
            branch_2 = slim.conv2d(inputs, 64, [1, 1], scope="Conv2d_0a_1x1")
            branch_2 = slim.conv2d(branch_2, 96, [3, 3], scope="Conv2d_0b_3x3")
            branch_2 = slim.conv2d(branch_2, 96, [3, 3], scope="Conv2d_0c_3x3")
        with tf.compat.v1.variable_scope("Branch_3"):
            branch_3 = slim.avg_pool2d(inputs, [3, 3], scope="AvgPool_0a_3x3")
            branch_3 = slim.conv2d(branch_3, 96, [1, 1], scope="Conv2d_0b_1x1")
        return inception_parts.concat_branches([branch_0, branch_1, branch_2, branch_3])


def block_reduction_a(inputs: tf.Tensor, scope: Optional[str] = None, reuse: Optional[bool] = None) -> tf.Tensor:
    """Reduction-A (35x35 -> 17x17x1024): 3x3/2 conv / 1x1-3x3-3x3/2 convs / 3x3/2 max pool."""
    with _block_scope(inputs, scope, "BlockReductionA", reuse):
        with tf.compat.v1.variable_scope("Branch_0"):
            branch_0 = slim.conv2d(inputs, 384, [3, 3], stride=2, padding="VALID", scope="Conv2d_1a_3x3")
        with tf.compat.v1.variable_scope("Branch_1"):
            branch_1 = slim.conv2d(inputs, 192, [1, 1], scope="Conv2d_0a_1x1")
            branch_1 = slim.conv2d(branch_1, 224, [3, 3], scope="Conv2d_0b_3x3")
            branch_1 = slim.conv2d(branch_1, 256, [3, 3], stride=2, padding="VALID", scope="Conv2d_1a_3x3")
        with tf.compat.v1.variable_scope("Branch_2"):
            branch_2 = slim.max_pool2d(inputs, [3, 3], stride=2, padding="VALID", scope="MaxPool_1a_3x3")
        return inception_parts.concat_branches([branch_0, branch_1, branch_2])


def block_inception_b(inputs: tf.Tensor, scope: Optional[str] = None, reuse: Optional[bool] = None) -> tf.Tensor:
    """Inception-B block on the 17x17 grid, with 7x7 convolutions factored into 1x7 and 7x1; 1024 out."""
    with _block_scope(inputs, scope, "BlockInceptionB", reuse):
        with tf.compat.v1.variable_scope("Branch_0"):
            branch_0 = slim.conv2d(inputs, 384, [1, 1], scope="Conv2d_0a_1x1")
        with tf.compat.v1.variable_scope("Branch_1"):
            branch_1 = slim.conv2d(inputs, 192, [1, 1], scope="Conv2d_0a_1x1")
            branch_1 = slim.conv2d(branch_1, 224, [1, 7], scope="Conv2d_0b_1x7")
            branch_1 = slim.conv2d(branch_1, 256, [7, 1], scope="Conv2d_0c_7x1")
        with tf.compat.v1.variable_scope("Branch_2"):
            branch_2 = slim.conv2d(inputs, 192, [1, 1], scope="Conv2d_0a_1x1")
            branch_2 = slim.conv2d(branch_2, 192, [7, 1], scope="Conv2d_0b_7x1")
            branch_2 = slim.conv2d(branch_2, 224, [1, 7], scope="Conv2d_0c_1x7")
            branch_2 = slim.conv2d(branch_2, 224, [7, 1], scope="Conv2d_0d_7x1")
            branch_2 = slim.conv2d(branch_2, 256, [1, 7], scope="Conv2d_0e_1x7")
        with tf.compat.v1.variable_scope("Branch_3"):
            branch_3 = slim.avg_pool2d(inputs, [3, 3], scope="AvgPool_0a_3x3")
            branch_3 = slim.conv2d(branch_3, 128, [1, 1], scope="Conv2d_0b_1x1")
        return inception_parts.concat_branches([branch_0, branch_1, branch_2, branch_3])


def block_reduction_b(inputs: tf.Tensor, scope: Optional[str] = None, reuse: Optional[bool] = None) -> tf.Tensor:
    """Reduction-B (17x17 -> 8x8x1536): 1x1-3x3/2 / 1x1-1x7-7x1-3x3/2 convs / 3x3/2 max pool."""
    with _block_scope(inputs, scope, "BlockReductionB", reuse):
        with tf.compat.v1.variable_scope("Branch_0"):
            branch_0 = slim.conv2d(inputs, 192, [1, 1], scope="Conv2d_0a_1x1")
            branch_0 = slim.conv2d(branch_0, 192, [3, 3], stride=2, padding="VALID", scope="Conv2d_1a_3x3")
        with tf.compat.v1.variable_scope("Branch_1"):
            branch_1 = slim.conv2d(inputs, 256, [1, 1], scope="Conv2d_0a_1x1")
            branch_1 = slim.conv2d(branch_1, 256, [1, 7], scope="Conv2d_0b_1x7")
            branch_1 = slim.conv2d(branch_1, 320, [7, 1], scope="Conv2d_0c_7x1")
            branch_1 = slim.conv2d(branch_1, 320, [3, 3], stride=2, padding="VALID", scope="Conv2d_1a_3x3")
        with tf.compat.v1.variable_scope("Branch_2"):
            branch_2 = slim.max_pool2d(inputs, [3, 3], stride=2, padding="VALID", scope="MaxPool_1a_3x3")
        return inception_parts.concat_branches([branch_0, branch_1, branch_2])


def block_inception_c(inputs: tf.Tensor, scope: Optional[str] = None, reuse: Optional[bool] = None) -> tf.Tensor:
    """Inception-C block on the 8x8 grid, whose wide branches end in parallel 1x3 and 3x1 convs; 1536 out."""
    with _block_scope(inputs, scope, "BlockInceptionC", reuse):
        with tf.compat.v1.variable_scope("Branch_0"):
            branch_0 = slim.conv2d(inputs, 256, [1, 1], scope="Conv2d_0a_1x1")
        with tf.compat.v1.variable_scope("Branch_1"):
            branch_1 = slim.conv2d(inputs, 384, [1, 1], scope="Conv2d_0a_1x1")
            branch_1 = inception_parts.concat_branches([
                slim.conv2d(branch_1, 256, [1, 3], scope="Conv2d_0b_1x3"),
                slim.conv2d(branch_1, 256, [3, 1], scope="Conv2d_0c_3x1"),
            ])
        with tf.compat.v1.variable_scope("Branch_2"):
            branch_2 = slim.conv2d(inputs, 384, [1, 1], scope="Conv2d_0a_1x1")
            branch_2 = slim.conv2d(branch_2, 448, [3, 1], scope="Conv2d_0b_3x1")
            branch_2 = slim.conv2d(branch_2, 512, [1, 3], scope="Conv2d_0c_1x3")
            branch_2 = inception_parts.concat_branches([
                slim.conv2d(branch_2, 256, [1, 3], scope="Conv2d_0d_1x3"),
                slim.conv2d(branch_2, 256, [3, 1], scope="Conv2d_0e_3x1"),
            ])
        with tf.compat.v1.variable_scope("Branch_3"):
            branch_3 = slim.avg_pool2d(inputs, [3, 3], scope="AvgPool_0a_3x3")
            branch_3 = slim.conv2d(branch_3, 256, [1, 1], scope="Conv2d_0b_1x1")
        return inception_parts.concat_branches([branch_0, branch_1, branch_2, branch_3])


LAYERS = (
    [
        ("Conv2d_1a_3x3", _conv(32, 3, stride=2, padding="VALID")),
        ("Conv2d_2a_3x3", _conv(32, 3, padding="VALID")),
        ("Conv2d_2b_3x3", _conv(64, 3)),
        ("Mixed_3a", _mixed_3a),
        ("Mixed_4a", _mixed_4a),
        ("Mixed_5a", _mixed_5a),
    ]
    + [(f"Mixed_5{letter}", block_inception_a) for letter in "bcde"]
    + [("Mixed_6a", block_reduction_a)]
    + [(f"Mixed_6{letter}", block_inception_b) for letter in "bcdefgh"]
    + [("Mixed_7a", block_reduction_b)]
    + [(f"Mixed_7{letter}", block_inception_c) for letter in "bcd"]
)
AUX_INPUT_END_POINT = "Mixed_6h"


def inception_v4_base(
    inputs: tf.Tensor, final_endpoint: str = "Mixed_7d", scope: Optional[str] = None
) -> tuple[tf.Tensor, dict]:
    """Build the convolutional trunk up to ``final_endpoint``; return ``(net, end_points)``."""
    end_points = {}
    with tf.compat.v1.variable_scope(scope, "InceptionV4", [inputs]):
        with slim.arg_scope([slim.conv2d, slim.max_pool2d, slim.avg_pool2d], stride=1, padding="SAME"):
            net = inception_parts.run_layers(inputs, LAYERS, final_endpoint, end_points)
    return net, end_points


def inception_v4(
    inputs: tf.Tensor,
    num_classes: Optional[int] = 1001,
    is_training: bool = True,
    dropout_keep_prob: float = 0.8,
    reuse: Optional[bool] = None,
    scope: str = "InceptionV4",
    create_aux_logits: bool = True,
) -> tuple[tf.Tensor, dict]:
    """Inception-v4 classifier; returns ``(logits, end_points)``, or pooled features if ``num_classes`` is 0/None.

    The auxiliary head (``end_points['AuxLogits']``) is built whenever
    ``create_aux_logits`` and ``num_classes`` are set, in training and in
    evaluation alike, as in the official checkpoint.
    """
    with_aux_logits = bool(create_aux_logits and num_classes)
    inception_parts.check_inputs(inputs, with_aux_logits, "inception_v4")
    with tf.compat.v1.variable_scope(scope, "InceptionV4", [inputs], reuse=reuse) as net_scope:
        with slim.arg_scope([slim.batch_norm, slim.dropout], is_training=is_training):
            net, end_points = inception_v4_base(inputs, scope=net_scope)
            if with_aux_logits:
                end_points["AuxLogits"] = inception_parts.aux_logits_head(
                    end_points[AUX_INPUT_END_POINT], num_classes, conv_scope="Conv2d_2a", logits_scope="Aux_logits"
                )
            logits = inception_parts.logits_head(net, num_classes, is_training, dropout_keep_prob, end_points)
    return logits, end_points


inception_v4.default_image_size = 299

inception_v4_arg_scope = inception_utils.inception_arg_scope
