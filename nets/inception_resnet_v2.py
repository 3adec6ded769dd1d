"""Inception-ResNet-v2 (Szegedy et al. 2016), with the variable names of the official TF-Slim checkpoint.

Layout: a stem (``Conv2d_1a_3x3`` .. ``MaxPool_5a_3x3``) and ``Mixed_5b`` take
299x299 to 35x35x320; 10 scaled residual ``block35`` units (``Repeat``),
reduction ``Mixed_6a`` (17x17x1088); 20 ``block17`` units (``Repeat_1``, end
point ``PreAuxLogits``, where the auxiliary head reads); reduction ``Mixed_7a``
(8x8x2080); 9 ``block8`` units (``Repeat_2``) and one without activation
(``Block8``); a 1x1 conv to 1536 (``Conv2d_7b_1x1``).
"""

import functools
from typing import Callable, Optional

import tensorflow as tf
import tf_slim as slim

from nets._impl import inception_parts

Activation = Optional[Callable[[tf.Tensor], tf.Tensor]]

# Residual scales and unit counts of the official checkpoint.
BLOCK35_SCALE, BLOCK35_REPEATS = 0.17, 10
BLOCK17_SCALE, BLOCK17_REPEATS = 0.10, 20
BLOCK8_SCALE, BLOCK8_REPEATS = 0.20, 9


def _add_residual(net: tf.Tensor, branches: list, scale: float, activation_fn: Activation) -> tf.Tensor:
    """``activation(net + scale * conv1x1(concat(branches)))``; the 1x1 conv restores ``net``'s depth.

    Under ReLU6 the scaled residual is clipped to [-6, 6] as the official code does.
    """
    mixed = inception_parts.concat_branches(branches)
    residual = slim.conv2d(
        mixed, net.get_shape()[3], [1, 1], normalizer_fn=None, activation_fn=None, scope="Conv2d_1x1"
    )
    residual = residual * scale
    if activation_fn == tf.nn.relu6:
        residual = tf.clip_by_value(residual, -6.0, 6.0)
    net = net + residual
    return activation_fn(net) if activation_fn else net


def block35(
    net: tf.Tensor,
    scale: float = 1.0,
    activation_fn: Activation = tf.nn.relu,
    scope: Optional[str] = None,
    reuse: Optional[bool] = None,
) -> tf.Tensor:
    """Inception-ResNet-A unit on the 35x35 grid: branches 1x1 / 1x1-3x3 / 1x1-3x3-3x3."""
    with tf.compat.v1.variable_scope(scope, "Block35", [net], reuse=reuse):
        with tf.compat.v1.variable_scope("Branch_0"):
            branch_0 = slim.conv2d(net, 32, [1, 1], scope="Conv2d_1x1")
        with tf.compat.v1.variable_scope("Branch_1"):
            branch_1 = slim.conv2d(net, 32, [1, 1], scope="Conv2d_0a_1x1")
            branch_1 = slim.conv2d(branch_1, 32, [3, 3], scope="Conv2d_0b_3x3")
        with tf.compat.v1.variable_scope("Branch_2"):
            branch_2 = slim.conv2d(net, 32, [1, 1], scope="Conv2d_0a_1x1")
            branch_2 = slim.conv2d(branch_2, 48, [3, 3], scope="Conv2d_0b_3x3")
            branch_2 = slim.conv2d(branch_2, 64, [3, 3], scope="Conv2d_0c_3x3")
        return _add_residual(net, [branch_0, branch_1, branch_2], scale, activation_fn)


def block17(
    net: tf.Tensor,
    scale: float = 1.0,
    activation_fn: Activation = tf.nn.relu,
    scope: Optional[str] = None,
    reuse: Optional[bool] = None,
) -> tf.Tensor:
    """Inception-ResNet-B unit on the 17x17 grid: branches 1x1 / 1x1-1x7-7x1."""
    with tf.compat.v1.variable_scope(scope, "Block17", [net], reuse=reuse):
        with tf.compat.v1.variable_scope("Branch_0"):
            branch_0 = slim.conv2d(net, 192, [1, 1], scope="Conv2d_1x1")
        with tf.compat.v1.variable_scope("Branch_1"):
            branch_1 = slim.conv2d(net, 128, [1, 1], scope="Conv2d_0a_1x1")
            branch_1 = slim.conv2d(branch_1, 160, [1, 7], scope="Conv2d_0b_1x7")
            branch_1 = slim.conv2d(branch_1, 192, [7, 1], scope="Conv2d_0c_7x1")
        return _add_residual(net, [branch_0, branch_1], scale, activation_fn)


def block8(
    net: tf.Tensor,
    scale: float = 1.0,
    activation_fn: Activation = tf.nn.relu,
    scope: Optional[str] = None,
    reuse: Optional[bool] = None,
) -> tf.Tensor:
    """Inception-ResNet-C unit on the 8x8 grid: branches 1x1 / 1x1-1x3-3x1."""
    with tf.compat.v1.variable_scope(scope, "Block8", [net], reuse=reuse):
        with tf.compat.v1.variable_scope("Branch_0"):
            branch_0 = slim.conv2d(net, 192, [1, 1], scope="Conv2d_1x1")
        with tf.compat.v1.variable_scope("Branch_1"):
            branch_1 = slim.conv2d(net, 192, [1, 1], scope="Conv2d_0a_1x1")
            branch_1 = slim.conv2d(branch_1, 224, [1, 3], scope="Conv2d_0b_1x3")
            branch_1 = slim.conv2d(branch_1, 256, [3, 1], scope="Conv2d_0c_3x1")
        return _add_residual(net, [branch_0, branch_1], scale, activation_fn)


def mixed_5b(net: tf.Tensor, scope: str) -> tf.Tensor:
    """Last stem block (35x35x192 -> 320): 1x1 / 1x1-5x5 / 1x1-3x3-3x3 / avg pool-1x1."""
    with tf.compat.v1.variable_scope(scope):
        with tf.compat.v1.variable_scope("Branch_0"):
            branch_0 = slim.conv2d(net, 96, [1, 1], scope="Conv2d_1x1")
        with tf.compat.v1.variable_scope("Branch_1"):
            branch_1 = slim.conv2d(net, 48, [1, 1], scope="Conv2d_0a_1x1")
            branch_1 = slim.conv2d(branch_1, 64, [5, 5], scope="Conv2d_0b_5x5")
        with tf.compat.v1.variable_scope("Branch_2"):
            branch_2 = slim.conv2d(net, 64, [1, 1], scope="Conv2d_0a_1x1")
            branch_2 = slim.conv2d(branch_2, 96, [3, 3], scope="Conv2d_0b_3x3")
            branch_2 = slim.conv2d(branch_2, 96, [3, 3], scope="Conv2d_0c_3x3")
        with tf.compat.v1.variable_scope("Branch_3"):
            branch_3 = slim.avg_pool2d(net, [3, 3], scope="AvgPool_0a_3x3")
            branch_3 = slim.conv2d(branch_3, 64, [1, 1], scope="Conv2d_0b_1x1")
        return inception_parts.concat_branches([branch_0, branch_1, branch_2, branch_3])


def mixed_6a(net: tf.Tensor, scope: str, stride: int, padding: str) -> tf.Tensor:
    """Reduction to the 17x17 grid (1088 channels): 3x3/2 conv / 1x1-3x3-3x3/2 convs / 3x3/2 max pool."""
    with tf.compat.v1.variable_scope(scope):
        with tf.compat.v1.variable_scope("Branch_0"):
            branch_0 = slim.conv2d(net, 384, [3, 3], stride=stride, padding=padding, scope="Conv2d_1a_3x3")
        with tf.compat.v1.variable_scope("Branch_1"):
            branch_1 = slim.conv2d(net, 256, [1, 1], scope="Conv2d_0a_1x1")
            branch_1 = slim.conv2d(branch_1, 256, [3, 3], scope="Conv2d_0b_3x3")
            branch_1 = slim.conv2d(branch_1, 384, [3, 3], stride=stride, padding=padding, scope="Conv2d_1a_3x3")
        with tf.compat.v1.variable_scope("Branch_2"):
            branch_2 = slim.max_pool2d(net, [3, 3], stride=stride, padding=padding, scope="MaxPool_1a_3x3")
        return inception_parts.concat_branches([branch_0, branch_1, branch_2])


def mixed_7a(net: tf.Tensor, scope: str, padding: str) -> tf.Tensor:
    """Reduction to the 8x8 grid (2080 channels): three conv branches ending in 3x3/2 and a 3x3/2 max pool."""
    with tf.compat.v1.variable_scope(scope):
        with tf.compat.v1.variable_scope("Branch_0"):
            branch_0 = slim.conv2d(net, 256, [1, 1], scope="Conv2d_0a_1x1")
            branch_0 = slim.conv2d(branch_0, 384, [3, 3], stride=2, padding=padding, scope="Conv2d_1a_3x3")
        with tf.compat.v1.variable_scope("Branch_1"):
            branch_1 = slim.conv2d(net, 256, [1, 1], scope="Conv2d_0a_1x1")
            branch_1 = slim.conv2d(branch_1, 288, [3, 3], stride=2, padding=padding, scope="Conv2d_1a_3x3")
        with tf.compat.v1.variable_scope("Branch_2"):
            branch_2 = slim.conv2d(net, 256, [1, 1], scope="Conv2d_0a_1x1")
            branch_2 = slim.conv2d(branch_2, 288, [3, 3], scope="Conv2d_0b_3x3")
            branch_2 = slim.conv2d(branch_2, 320, [3, 3], stride=2, padding=padding, scope="Conv2d_1a_3x3")
        with tf.compat.v1.variable_scope("Branch_3"):
            branch_3 = slim.max_pool2d(net, [3, 3], stride=2, padding=padding, scope="MaxPool_1a_3x3")
        return inception_parts.concat_branches([branch_0, branch_1, branch_2, branch_3])


def _then(first: Callable[[tf.Tensor], tf.Tensor], layer: inception_parts.LayerFn) -> inception_parts.LayerFn:
    """An end-point layer that runs ``first`` (outside the end point's scope) before ``layer``."""

    def combined(net: tf.Tensor, scope: str) -> tf.Tensor:
        return layer(first(net), scope=scope)

    return combined


def _layers(
    output_stride: int, align_feature_maps: bool, activation_fn: Activation
) -> list[tuple[str, inception_parts.LayerFn]]:
    """The ``(end_point, layer_fn)`` sequence of the trunk for the given stride and padding choices."""
    padding = "SAME" if align_feature_maps else "VALID"
    atrous = output_stride == 8
    conv = functools.partial(slim.conv2d, padding=padding)
    max_pool = functools.partial(slim.max_pool2d, kernel_size=[3, 3], stride=2, padding=padding)
    block35_stack = functools.partial(
        slim.repeat, repetitions=BLOCK35_REPEATS, layer=block35, scale=BLOCK35_SCALE, activation_fn=activation_fn
    )

    def block17_stack(net: tf.Tensor, scope: str) -> tf.Tensor:
        del scope  # PreAuxLogits names an output only; the units live under slim.repeat's Repeat_1 scope.
        # With output_stride 8 the 17x17 grid is not reduced, so its units dilate instead.
        with slim.arg_scope([slim.conv2d], rate=2 if atrous else 1):
            return slim.repeat(net, BLOCK17_REPEATS, block17, scale=BLOCK17_SCALE, activation_fn=activation_fn)

    def block8_stack(net: tf.Tensor) -> tf.Tensor:
        net = slim.repeat(net, BLOCK8_REPEATS, block8, scale=BLOCK8_SCALE, activation_fn=activation_fn)
        return block8(net, activation_fn=None)

    return [
        ("Conv2d_1a_3x3", functools.partial(conv, num_outputs=32, kernel_size=[3, 3], stride=2)),
        ("Conv2d_2a_3x3", functools.partial(conv, num_outputs=32, kernel_size=[3, 3])),
        ("Conv2d_2b_3x3", functools.partial(slim.conv2d, num_outputs=64, kernel_size=[3, 3])),
        ("MaxPool_3a_3x3", max_pool),
        ("Conv2d_3b_1x1", functools.partial(conv, num_outputs=80, kernel_size=[1, 1])),
        ("Conv2d_4a_3x3", functools.partial(conv, num_outputs=192, kernel_size=[3, 3])),
        ("MaxPool_5a_3x3", max_pool),
        ("Mixed_5b", mixed_5b),
        ("Mixed_6a", _then(block35_stack, functools.partial(mixed_6a, stride=1 if atrous else 2, padding=padding))),
        ("PreAuxLogits", block17_stack),
        ("Mixed_7a", functools.partial(mixed_7a, padding=padding)),
        ("Conv2d_7b_1x1", _then(block8_stack, functools.partial(slim.conv2d, num_outputs=1536, kernel_size=[1, 1]))),
    ]


def inception_resnet_v2_base(
    inputs: tf.Tensor,
    final_endpoint: str = "Conv2d_7b_1x1",
    output_stride: int = 16,
    align_feature_maps: bool = False,
    scope: Optional[str] = None,
    activation_fn: Activation = tf.nn.relu,
) -> tuple[tf.Tensor, dict]:
    """Build the trunk up to ``final_endpoint``; return ``(net, end_points)``.

    ``output_stride`` 8 keeps the 17x17 grid at stride 8 (dilated ``block17``
    units) and is only available up to ``PreAuxLogits``; ``align_feature_maps``
    switches the stem and reductions to SAME padding.
    """
    if output_stride not in (8, 16):
        raise ValueError(f"output_stride must be 8 or 16, got {output_stride!r}.")
    layers = _layers(output_stride, align_feature_maps, activation_fn)
    names = [name for name, _ in layers]
    if output_stride == 8 and final_endpoint in names and names.index(final_endpoint) > names.index("PreAuxLogits"):
        raise ValueError(
            f"output_stride=8 is only supported up to final_endpoint='PreAuxLogits', got {final_endpoint!r}; "
            "use output_stride=16 for the full network."
        )
    end_points = {}
    with tf.compat.v1.variable_scope(scope, "InceptionResnetV2", [inputs]):
        with slim.arg_scope([slim.conv2d, slim.max_pool2d, slim.avg_pool2d], stride=1, padding="SAME"):
            net = inception_parts.run_layers(inputs, layers, final_endpoint, end_points)
    return net, end_points


def inception_resnet_v2(
    inputs: tf.Tensor,
    num_classes: Optional[int] = 1001,
    is_training: bool = True,
    dropout_keep_prob: float = 0.8,
    reuse: Optional[bool] = None,
    scope: str = "InceptionResnetV2",
    create_aux_logits: bool = True,
    activation_fn: Activation = tf.nn.relu,
) -> tuple[tf.Tensor, dict]:
    """Inception-ResNet-v2 classifier; returns ``(logits, end_points)``, or pooled features if ``num_classes``
    is 0/None.

    The auxiliary head (``end_points['AuxLogits']``) is built whenever
    ``create_aux_logits`` and ``num_classes`` are set, in training and in
    evaluation alike, as in the official checkpoint.
    """
    with_aux_logits = bool(create_aux_logits and num_classes)
    inception_parts.check_inputs(inputs, with_aux_logits, "inception_resnet_v2")
    with tf.compat.v1.variable_scope(scope, "InceptionResnetV2", [inputs], reuse=reuse) as net_scope:
        with slim.arg_scope([slim.batch_norm, slim.dropout], is_training=is_training):
            net, end_points = inception_resnet_v2_base(inputs, scope=net_scope, activation_fn=activation_fn)
            if with_aux_logits:
                end_points["AuxLogits"] = inception_parts.aux_logits_head(
                    end_points["PreAuxLogits"], num_classes, conv_scope="Conv2d_2a_5x5", logits_scope="Logits"
                )
            logits = inception_parts.logits_head(
                net, num_classes, is_training, dropout_keep_prob, end_points,
                pool_scope="AvgPool_1a_8x8", flatten_before_dropout=True,
            )
    return logits, end_points


def inception_resnet_v2_arg_scope(
    weight_decay: float = 0.00004,
    batch_norm_decay: float = 0.9997,
    batch_norm_epsilon: float = 0.001,
    activation_fn: Activation = tf.nn.relu,
    batch_norm_updates_collections: Optional[str] = tf.compat.v1.GraphKeys.UPDATE_OPS,
    batch_norm_scale: bool = False,
) -> dict:
    """Official defaults: L2 on conv and FC weights and biases, BN (no gamma) after each conv."""
    regularizer = slim.l2_regularizer(weight_decay)
    normalizer_params = inception_parts.batch_norm_params(
        batch_norm_decay, batch_norm_epsilon, batch_norm_updates_collections, batch_norm_scale
    )
    with slim.arg_scope(
        [slim.conv2d, slim.fully_connected], weights_regularizer=regularizer, biases_regularizer=regularizer
    ), slim.arg_scope(
        [slim.conv2d], activation_fn=activation_fn, normalizer_fn=slim.batch_norm, normalizer_params=normalizer_params
    ) as scope:
        return scope


inception_resnet_v2.default_image_size = 299
