"""All Inception networks under one namespace, as the official ``nets/inception.py`` offers them.

``from nets import inception`` then ``inception.inception_v3(...)``,
``inception.inception_v4_base(...)``, ``inception.inception_resnet_v2_arg_scope()`` ...
"""

from nets.inception_resnet_v2 import inception_resnet_v2, inception_resnet_v2_arg_scope, inception_resnet_v2_base
from nets.inception_v1 import inception_v1, inception_v1_arg_scope, inception_v1_base
from nets.inception_v2 import inception_v2, inception_v2_arg_scope, inception_v2_base
from nets.inception_v3 import inception_v3, inception_v3_arg_scope, inception_v3_base
from nets.inception_v4 import inception_v4, inception_v4_arg_scope, inception_v4_base

__all__ = [
    "inception_resnet_v2",
    "inception_resnet_v2_arg_scope",
    "inception_resnet_v2_base",
    "inception_v1",
    "inception_v1_arg_scope",
    "inception_v1_base",
    "inception_v2",
    "inception_v2_arg_scope",
    "inception_v2_base",
    "inception_v3",
    "inception_v3_arg_scope",
    "inception_v3_base",
    "inception_v4",
    "inception_v4_arg_scope",
    "inception_v4_base",
]
