"""AlexNet v2 (Krizhevsky 2014, "One weird trick") from tf_slim, with the zoo's ``Predictions`` end point.

tf_slim's definition already creates the official variables; this module only
adds the softmax end point and re-exports the arg_scope.
"""

import tensorflow as tf
from tf_slim.nets import alexnet as _slim_alexnet

from nets.slim_adapters import add_predictions, require_num_classes

alexnet_v2_arg_scope = _slim_alexnet.alexnet_v2_arg_scope


def alexnet_v2(
    inputs: tf.Tensor,
    num_classes: int = 1000,
    is_training: bool = True,
    dropout_keep_prob: float = 0.5,
    spatial_squeeze: bool = True,
    scope: str = "alexnet_v2",
) -> tuple:
    """AlexNet v2 on 224x224 inputs: returns ``(logits, end_points)``."""
    require_num_classes(num_classes, "alexnet_v2")
    logits, end_points = _slim_alexnet.alexnet_v2(
        inputs, num_classes, is_training, dropout_keep_prob, spatial_squeeze, scope
    )
    return logits, add_predictions(logits, end_points)


alexnet_v2.default_image_size = 224
