"""LeNet: the two-conv MNIST classifier of the TF-Slim model zoo, with the official ``LeNet`` scopes."""

from typing import Callable, Dict, Optional, Tuple

import tensorflow as tf
import tf_slim as slim

EndPoints = Dict[str, tf.Tensor]


def lenet(
    images: tf.Tensor,
    num_classes: Optional[int] = 10,
    is_training: bool = False,
    dropout_keep_prob: float = 0.5,
    prediction_fn: Callable[..., tf.Tensor] = slim.softmax,
    scope: str = "LeNet",
) -> Tuple[tf.Tensor, EndPoints]:
    """Build LeNet on ``images`` [batch, 28, 28, channels]; return ``(logits, end_points)``.

    With ``num_classes`` 0 or None the 1024-wide ``fc3`` features (before
    ``dropout3``) are returned instead of logits (no ``fc4`` layer is created).
    Use it under ``lenet_arg_scope()`` to get the official initializers.
    """
    end_points: EndPoints = {}
    with tf.compat.v1.variable_scope(scope, "LeNet", [images]):
        net = slim.conv2d(images, 32, [5, 5], scope="conv1")
        end_points["conv1"] = net
        net = slim.max_pool2d(net, [2, 2], 2, scope="pool1")
        end_points["pool1"] = net
        net = slim.conv2d(net, 64, [5, 5], scope="conv2")
        end_points["conv2"] = net
        net = slim.max_pool2d(net, [2, 2], 2, scope="pool2")
        end_points["pool2"] = net
        net = slim.flatten(net)
        end_points["Flatten"] = net
        net = slim.fully_connected(net, 1024, scope="fc3")
        end_points["fc3"] = net
        if not num_classes:
            return net, end_points
        net = slim.dropout(net, dropout_keep_prob, is_training=is_training, scope="dropout3")
        end_points["dropout3"] = net
        logits = slim.fully_connected(net, num_classes, activation_fn=None, scope="fc4")
        end_points["Logits"] = logits
    # As in the official definition, the softmax is named outside the network's scope.
    end_points["Predictions"] = prediction_fn(logits, scope="Predictions")
    return logits, end_points


lenet.default_image_size = 28


def lenet_arg_scope(weight_decay: float = 0.0) -> dict:
    """Official LeNet defaults: ReLU, truncated-normal(0.1) weights, L2 decay on conv and dense weights."""
    with slim.arg_scope(
        [slim.conv2d, slim.fully_connected],
        weights_regularizer=slim.l2_regularizer(weight_decay),
        weights_initializer=tf.compat.v1.truncated_normal_initializer(stddev=0.1),
        activation_fn=tf.nn.relu,
    ) as scope:
        return scope
