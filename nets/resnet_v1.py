"""ResNet v1 (He et al. 2015) with the official TF-Slim outputs, built on tf_slim's definition.

Same variables as the official checkpoints; adds what tf_slim lacks: squeezed
logits ``[batch, num_classes]`` (``spatial_squeeze``), the ``global_pool`` and
``<scope>/spatial_squeeze`` end points, ``depth_multiplier``/``min_base_depth``,
and ``default_image_size``.
"""

from tf_slim.nets import resnet_utils as _slim_resnet_utils
from tf_slim.nets import resnet_v1 as _slim_resnet_v1

from nets.slim_adapters import resnet_network

resnet_arg_scope = _slim_resnet_utils.resnet_arg_scope

DEFAULT_IMAGE_SIZE = 224


def _make(depth: int):
    return resnet_network(_slim_resnet_v1.resnet_v1, _slim_resnet_v1.resnet_v1_block,
                          "resnet_v1", depth, DEFAULT_IMAGE_SIZE)


resnet_v1_50 = _make(50)
resnet_v1_101 = _make(101)
resnet_v1_152 = _make(152)
resnet_v1_200 = _make(200)
