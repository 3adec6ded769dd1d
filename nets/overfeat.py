"""OverFeat (Sermanet et al. 2014) from tf_slim, with ``default_image_size`` and ``Predictions``.

tf_slim's definition already creates the official variables but has no
``default_image_size``; the official one is 231.
"""

import tensorflow as tf
from tf_slim.nets import overfeat as _slim_overfeat

from nets.slim_adapters import add_predictions, require_num_classes

overfeat_arg_scope = _slim_overfeat.overfeat_arg_scope


def overfeat(
    inputs: tf.Tensor,
    num_classes: int = 1000,
    is_training: bool = True,
    dropout_keep_prob: float = 0.5,
    spatial_squeeze: bool = True,
    scope: str = "overfeat",
) -> tuple:
    """OverFeat on 231x231 inputs: returns ``(logits, end_points)``."""
    require_num_classes(num_classes, "overfeat")
    logits, end_points = _slim_overfeat.overfeat(
        inputs, num_classes, is_training, dropout_keep_prob, spatial_squeeze, scope
    )
    return logits, add_predictions(logits, end_points)


overfeat.default_image_size = 231
