"""Pick the preprocessing a network was trained with, by network (or style) name.

Inception-style preprocessing ([-1, 1] values) serves the Inception, MobileNet,
NASNet/PNASNet and ResNet v2 checkpoints; VGG-style (mean-pixel subtraction)
serves VGG, ResNet v1 and the other 0..255 ImageNet nets; CifarNet and LeNet
have their own. NASNet-CIFAR, trained on CIFAR-10 like CifarNet, uses the
CifarNet style.

ResNet v2 is the one departure from the official factory, which maps it to
VGG style: the official ResNet v2 checkpoints were trained with Inception
preprocessing at 299 px, so that is the default here. The name ``"vgg"``
(``--preprocessing_name=vgg``) gives the official factory's choice.
"""

import difflib
from types import ModuleType
from typing import Callable, Optional

import tensorflow as tf

from nets.preprocessing import (
    cifarnet_preprocessing,
    inception_preprocessing,
    lenet_preprocessing,
    vgg_preprocessing,
)

_INCEPTION_NAMES = (
    "inception",
    "inception_v1",
    "inception_v2",
    "inception_v3",
    "inception_v4",
    "inception_resnet_v2",
    "mobilenet_v1",
    "mobilenet_v1_075",
    "mobilenet_v1_050",
    "mobilenet_v1_025",
    "mobilenet_v2",
    "mobilenet_v2_140",
    "mobilenet_v2_035",
    "mobilenet_v3_small",
    "mobilenet_v3_large",
    "mobilenet_v3_small_minimalistic",
    "mobilenet_v3_large_minimalistic",
    "mobilenet_edgetpu",
    "mobilenet_edgetpu_075",
    "nasnet_mobile",
    "nasnet_large",
    "pnasnet_mobile",
    "pnasnet_large",
    "resnet_v2_50",
    "resnet_v2_101",
    "resnet_v2_152",
    "resnet_v2_200",
)
_VGG_NAMES = (
    "vgg",
    "vgg_a",
    "vgg_16",
    "vgg_19",
    "resnet_v1_18",
    "resnet_v1_34",
    "resnet_v1_50",
    "resnet_v1_101",
    "resnet_v1_152",
    "resnet_v1_200",
    "alexnet_v2",
    "overfeat",
)

PREPROCESSING_MODULES = {
    **dict.fromkeys(_INCEPTION_NAMES, inception_preprocessing),
    **dict.fromkeys(_VGG_NAMES, vgg_preprocessing),
    **dict.fromkeys(("cifarnet", "nasnet_cifar"), cifarnet_preprocessing),
    "lenet": lenet_preprocessing,
}


def preprocessing_names() -> list:
    """All names ``get_preprocessing`` accepts, sorted."""
    return sorted(PREPROCESSING_MODULES)


def _module_for(name: str) -> ModuleType:
    """The preprocessing module of ``name``, or a ValueError listing the valid names."""
    if not isinstance(name, str):
        raise TypeError(f"name={name!r} must be a network or preprocessing name string such as 'inception'.")
    if name in PREPROCESSING_MODULES:
        return PREPROCESSING_MODULES[name]
    closest = difflib.get_close_matches(name, PREPROCESSING_MODULES, n=3)
    hint = f" (did you mean {', '.join(repr(match) for match in closest)}?)" if closest else ""
    raise ValueError(
        f"name={name!r} has no preprocessing{hint}; use one of: {', '.join(preprocessing_names())}."
    )


def output_channels(name: str, image_channels: Optional[int], use_grayscale: bool = False) -> int:
    """The channels the preprocessing ``name`` makes of images with ``image_channels`` (None: unknown).

    This is the channel rule of training, evaluation and export: 1 with ``use_grayscale``; the
    image's own for a style that keeps them (LeNet's, as officially: MNIST LeNet reads 1 channel);
    otherwise 3, since the other styles serve networks trained on RGB and repeat a gray channel.
    Unknown channels count as RGB.
    """
    if use_grayscale:
        return 1
    if getattr(_module_for(name), "KEEPS_CHANNELS", False) and image_channels is not None:
        return image_channels
    return 3


def get_preprocessing(name: str, is_training: bool = False, use_grayscale: bool = False) -> Callable:
    """Return ``preprocessing_fn(image, output_height, output_width, **kwargs) -> image`` for ``name``.

    ``kwargs`` go to the style's ``preprocess_image`` (e.g. ``central_fraction``
    for inception, ``resize_side_min`` for vgg).
    """
    module = _module_for(name)

    def preprocessing_fn(image: tf.Tensor, output_height: int, output_width: int, **kwargs) -> tf.Tensor:
        return module.preprocess_image(
            image, output_height, output_width, is_training=is_training, use_grayscale=use_grayscale, **kwargs
        )

    return preprocessing_fn
