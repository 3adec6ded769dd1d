"""NASNet-A (Zoph et al., 2018) for CIFAR-10 and ImageNet, at the official path ``nets.nasnet.nasnet``.

Variable-compatible with the official TF-Slim checkpoints. The ``*_config()`` functions return
a fresh, editable ``NasNetHParams`` with the official fields and values
(``config.set_hparam('data_format', 'NCHW')``, ``'use_aux_head'``, ``'use_bounded_activation'``, ...).
"""

from typing import Dict, Iterator, Optional, Tuple

import tensorflow as tf
import tf_slim as slim

from nets._impl import nasnet_base
from nets._impl.nasnet_base import NasNetHParams
from nets.nasnet import nasnet_utils


def cifar_config() -> NasNetHParams:
    """Hyper-parameters of NASNet-A 6@768 for CIFAR-10 (937,500 steps: 600 epochs at batch 32)."""
    return nasnet_base.nasnet_hparams(
        stem_multiplier=3.0,
        drop_path_keep_prob=0.6,
        num_cells=18,
        num_conv_filters=32,
        dense_dropout_keep_prob=1.0,
        skip_reduction_layer_input=0,
        total_training_steps=937500,
    )


def large_imagenet_config() -> NasNetHParams:
    """Hyper-parameters of NASNet-A 6@4032 for 331x331 ImageNet images."""
    return nasnet_base.nasnet_hparams(
        stem_multiplier=3.0,
        drop_path_keep_prob=0.7,
        num_cells=18,
        num_conv_filters=168,
        dense_dropout_keep_prob=0.5,
        skip_reduction_layer_input=1,
        total_training_steps=250000,
    )


def mobile_imagenet_config() -> NasNetHParams:
    """Hyper-parameters of NASNet-A 4@1056 for 224x224 ImageNet images."""
    return nasnet_base.nasnet_hparams(
        stem_multiplier=1.0,
        drop_path_keep_prob=1.0,
        num_cells=12,
        num_conv_filters=44,
        dense_dropout_keep_prob=0.5,
        skip_reduction_layer_input=0,
        total_training_steps=250000,
    )


def nasnet_cifar_arg_scope(
    weight_decay: float = 5e-4, batch_norm_decay: float = 0.9, batch_norm_epsilon: float = 1e-5
) -> dict:
    """arg_scope of NASNet-A CIFAR with its official defaults.

    Args:
        weight_decay: L2 regularization of the weights.
        batch_norm_decay: decay of the batch norm moving averages.
        batch_norm_epsilon: added to the variance in batch norm.

    Returns:
        The arg_scope to build the network in.
    """
    return nasnet_base.nasnet_arg_scope(weight_decay, batch_norm_decay, batch_norm_epsilon)


def nasnet_mobile_arg_scope(
    weight_decay: float = 4e-5, batch_norm_decay: float = 0.9997, batch_norm_epsilon: float = 1e-3
) -> dict:
    """arg_scope of NASNet-A Mobile with its official defaults (arguments as ``nasnet_cifar_arg_scope``)."""
    return nasnet_base.nasnet_arg_scope(weight_decay, batch_norm_decay, batch_norm_epsilon)


def nasnet_large_arg_scope(
    weight_decay: float = 5e-5, batch_norm_decay: float = 0.9997, batch_norm_epsilon: float = 1e-3
) -> dict:
    """arg_scope of NASNet-A Large with its official defaults (arguments as ``nasnet_cifar_arg_scope``)."""
    return nasnet_base.nasnet_arg_scope(weight_decay, batch_norm_decay, batch_norm_epsilon)


def _cifar_stem(images: tf.Tensor, config: NasNetHParams) -> list:
    """A 3x3 conv at full resolution; returns the hidden-state history ``[None, stem]``."""
    net = slim.conv2d(images, int(config.num_conv_filters * config.stem_multiplier), 3, scope="l1_stem_3x3")
    return [None, slim.batch_norm(net, scope="l1_stem_bn")]


def _nasnet_stages(
    images: tf.Tensor,
    num_classes: Optional[int],
    config: NasNetHParams,
    is_training: bool,
    imagenet: bool,
    current_step: Optional[tf.Tensor],
) -> Iterator[nasnet_base.Stage]:
    """Stem, normal cells with a reduction cell before each resolution drop, aux head, classifier."""
    num_stem_cells = nasnet_base.NUM_IMAGENET_STEM_CELLS if imagenet else 0
    reductions = nasnet_utils.calc_reduction_layers(config.num_cells, config.num_reduction_layers)
    cell_args = (
        config.num_conv_filters,
        nasnet_base.drop_path_keep_prob(config, is_training),
        config.num_cells + len(reductions) + num_stem_cells,
        config.total_training_steps,
        config.use_bounded_activation,
    )
    normal_cell = nasnet_utils.NasNetANormalCell(*cell_args)
    reduction_cell = nasnet_utils.NasNetAReductionCell(*cell_args)
    aux_cell = nasnet_base.aux_head_cell(config, num_classes, is_training)
    images = nasnet_base.to_data_format(images, config)
    if imagenet:
        outputs = nasnet_base.imagenet_stem(images, config, reduction_cell, current_step)
    else:
        outputs = _cifar_stem(images, config)
    net = outputs[-1]
    yield "Stem", net

    cell_num_in_network = num_stem_cells
    filter_scaling = 1.0
    for cell_num in range(config.num_cells):
        layer_before_reduction = outputs[-2]
        if cell_num in reductions:
            filter_scaling *= config.filter_scaling_rate
            reduction_num = reductions.index(cell_num)
            net = reduction_cell(
                net,
                scope=f"reduction_cell_{reduction_num}",
                filter_scaling=filter_scaling,
                stride=2,
                prev_layer=outputs[-2],
                cell_num=cell_num_in_network,
                current_step=current_step,
            )
            cell_num_in_network += 1
            outputs.append(net)
            yield f"Reduction_Cell_{reduction_num}", net
        net = normal_cell(
            net,
            scope=f"cell_{cell_num}",
            filter_scaling=filter_scaling,
            stride=1,
            prev_layer=layer_before_reduction if config.skip_reduction_layer_input else outputs[-2],
            cell_num=cell_num_in_network,
            current_step=current_step,
        )
        cell_num_in_network += 1
        outputs.append(net)
        yield f"Cell_{cell_num}", net
        if cell_num == aux_cell:
            yield "AuxLogits", nasnet_base.aux_head(net, num_classes, config, f"aux_{cell_num}")
    yield from nasnet_base.classifier_stages(net, num_classes, config)


def _build(
    images: tf.Tensor,
    num_classes: Optional[int],
    is_training: bool,
    final_endpoint: Optional[str],
    config: NasNetHParams,
    current_step: Optional[tf.Tensor],
    imagenet: bool,
) -> Tuple[tf.Tensor, Dict[str, tf.Tensor]]:
    """Check the arguments, then build NASNet-A (with the ImageNet stem if ``imagenet``)."""
    nasnet_base.check_inputs(images, num_classes, config)
    stages = _nasnet_stages(images, num_classes, config, is_training, imagenet, current_step)
    return nasnet_base.build_network(stages, config, is_training, final_endpoint)


def build_nasnet_cifar(
    images: tf.Tensor,
    num_classes: Optional[int],
    is_training: bool = True,
    config: Optional[NasNetHParams] = None,
    current_step: Optional[tf.Tensor] = None,
) -> Tuple[tf.Tensor, Dict[str, tf.Tensor]]:
    """NASNet-A 6@768 for 32x32 images.

    Args:
        images: ``[batch, 32, 32, 3]`` NHWC images (transposed here if ``config.data_format`` is NCHW).
        num_classes: classes of the logits layer; 0 or None for the pooled features only.
        is_training: training mode (batch statistics, dropout, drop-path, the auxiliary head).
        config: hyper-parameters (``cifar_config()`` when None); not modified.
        current_step: drives the drop-path schedule (the global step when None).

    Returns:
        ``(logits, end_points)`` (the pooled features instead of logits without classes).

    Raises:
        ValueError: bad images, ``num_classes`` or configuration.
    """
    config = cifar_config() if config is None else config
    return _build(images, num_classes, is_training, None, config, current_step, imagenet=False)


build_nasnet_cifar.default_image_size = 32


def build_nasnet_mobile(
    images: tf.Tensor,
    num_classes: Optional[int],
    is_training: bool = True,
    final_endpoint: Optional[str] = None,
    config: Optional[NasNetHParams] = None,
    current_step: Optional[tf.Tensor] = None,
) -> Tuple[tf.Tensor, Dict[str, tf.Tensor]]:
    """NASNet-A 4@1056 for 224x224 ImageNet images; arguments as ``build_nasnet_cifar``.

    ``final_endpoint`` (e.g. ``'Cell_11'``, ``'global_pool'``) stops the build after that end
    point and returns it as the first value. ``config`` defaults to ``mobile_imagenet_config()``.
    """
    config = mobile_imagenet_config() if config is None else config
    return _build(images, num_classes, is_training, final_endpoint, config, current_step, imagenet=True)


build_nasnet_mobile.default_image_size = 224


def build_nasnet_large(
    images: tf.Tensor,
    num_classes: Optional[int],
    is_training: bool = True,
    final_endpoint: Optional[str] = None,
    config: Optional[NasNetHParams] = None,
    current_step: Optional[tf.Tensor] = None,
) -> Tuple[tf.Tensor, Dict[str, tf.Tensor]]:
    """NASNet-A 6@4032 for 331x331 ImageNet images; arguments as ``build_nasnet_mobile``.

    ``config`` defaults to ``large_imagenet_config()``.
    """
    config = large_imagenet_config() if config is None else config
    return _build(images, num_classes, is_training, final_endpoint, config, current_step, imagenet=True)


build_nasnet_large.default_image_size = 331
