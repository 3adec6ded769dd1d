"""CifarNet: the small CIFAR-10 convnet of the TF-Slim model zoo (two conv + LRN stages, three dense layers).

Variable scopes follow the official ``CifarNet`` checkpoints.
"""

from typing import Callable, Dict, Optional, Tuple

import tensorflow as tf
import tf_slim as slim

from nets._impl.initializers import trunc_normal

EndPoints = Dict[str, tf.Tensor]


__all__ = ["cifarnet", "cifarnet_arg_scope", "trunc_normal"]


def _local_response_norm(net: tf.Tensor, name: str) -> tf.Tensor:
    """Cross-channel LRN with the constants of the original cuda-convnet CIFAR model."""
    return tf.nn.lrn(net, depth_radius=4, bias=1.0, alpha=0.001 / 9.0, beta=0.75, name=name)


def cifarnet(
    images: tf.Tensor,
    num_classes: Optional[int] = 10,
    is_training: bool = False,
    dropout_keep_prob: float = 0.5,
    prediction_fn: Callable[..., tf.Tensor] = slim.softmax,
    scope: str = "CifarNet",
) -> Tuple[tf.Tensor, EndPoints]:
    """Build CifarNet on ``images`` [batch, 32, 32, 3]; return ``(logits, end_points)``.

    With ``num_classes`` 0 or None the 192-wide ``fc4`` features are returned
    instead of logits (no ``logits`` layer is created). Use it under
    ``cifarnet_arg_scope()`` to get the official initializers and weight decay.
    """
    end_points: EndPoints = {}
    with tf.compat.v1.variable_scope(scope, "CifarNet", [images]):
        net = slim.conv2d(images, 64, [5, 5], scope="conv1")
        end_points["conv1"] = net
        net = slim.max_pool2d(net, [2, 2], 2, scope="pool1")
        end_points["pool1"] = net
        net = _local_response_norm(net, name="norm1")
        net = slim.conv2d(net, 64, [5, 5], scope="conv2")
        end_points["conv2"] = net
        net = _local_response_norm(net, name="norm2")
        net = slim.max_pool2d(net, [2, 2], 2, scope="pool2")
        end_points["pool2"] = net
        net = slim.flatten(net)
        end_points["Flatten"] = net
        net = slim.fully_connected(net, 384, scope="fc3")
        end_points["fc3"] = net
        net = slim.dropout(net, dropout_keep_prob, is_training=is_training, scope="dropout3")
        net = slim.fully_connected(net, 192, scope="fc4")
        end_points["fc4"] = net
        if not num_classes:
            return net, end_points
        logits = slim.fully_connected(
            net,
            num_classes,
            biases_initializer=tf.compat.v1.zeros_initializer(),
            weights_initializer=trunc_normal(1 / 192.0),
            weights_regularizer=None,
            activation_fn=None,
            scope="logits",
        )
        end_points["Logits"] = logits
        end_points["Predictions"] = prediction_fn(logits, scope="Predictions")
    return logits, end_points


cifarnet.default_image_size = 32


def cifarnet_arg_scope(weight_decay: float = 0.004) -> dict:
    """Official CifarNet defaults: ReLU everywhere, L2 decay and 0.1 bias init on the dense layers."""
    with slim.arg_scope(
        [slim.conv2d],
        weights_initializer=trunc_normal(5e-2),
        activation_fn=tf.nn.relu,
    ):
        with slim.arg_scope(
            [slim.fully_connected],
            biases_initializer=tf.compat.v1.constant_initializer(0.1),
            weights_initializer=trunc_normal(0.04),
            weights_regularizer=slim.l2_regularizer(weight_decay),
            activation_fn=tf.nn.relu,
        ) as scope:
            return scope
