"""PNASNet-5 (Liu et al., 2018) for ImageNet, at the official path ``nets.nasnet.pnasnet``.

Variable-compatible with the official TF-Slim checkpoints. PNASNet reuses NASNet's stem,
auxiliary head and classifier, but has a single cell type: it halves the resolution with
stride-2 copies of its normal cell instead of separate reduction cells.
"""

from typing import Dict, Iterator, Optional, Tuple

import tensorflow as tf

from nets._impl import nasnet_base, nasnet_cells
from nets._impl.nasnet_base import NasNetHParams
from nets.nasnet import nasnet_utils


def large_imagenet_config() -> NasNetHParams:
    """Hyper-parameters of PNASNet-5 Large for 331x331 ImageNet images."""
    return nasnet_base.nasnet_hparams(
        stem_multiplier=3.0,
        drop_path_keep_prob=0.6,
        num_cells=12,
        num_conv_filters=216,
        dense_dropout_keep_prob=0.5,
        skip_reduction_layer_input=1,
        total_training_steps=250000,
    )


def mobile_imagenet_config() -> NasNetHParams:
    """Hyper-parameters of PNASNet-5 Mobile for 224x224 ImageNet images."""
    return nasnet_base.nasnet_hparams(
        stem_multiplier=1.0,
        drop_path_keep_prob=1.0,
        num_cells=9,
        num_conv_filters=54,
        dense_dropout_keep_prob=0.5,
        skip_reduction_layer_input=1,
        total_training_steps=250000,
    )


def pnasnet_large_arg_scope(
    weight_decay: float = 4e-5, batch_norm_decay: float = 0.9997, batch_norm_epsilon: float = 0.001
) -> dict:
    """arg_scope of PNASNet-5 Large with its official defaults (arguments as ``nasnet.nasnet_cifar_arg_scope``)."""
    return nasnet_base.nasnet_arg_scope(weight_decay, batch_norm_decay, batch_norm_epsilon)


def pnasnet_mobile_arg_scope(
    weight_decay: float = 4e-5, batch_norm_decay: float = 0.9997, batch_norm_epsilon: float = 0.001
) -> dict:
    """arg_scope of PNASNet-5 Mobile with its official defaults (arguments as ``nasnet.nasnet_cifar_arg_scope``)."""
    return nasnet_base.nasnet_arg_scope(weight_decay, batch_norm_decay, batch_norm_epsilon)


class PNasNetNormalCell(nasnet_cells.FixedTopologyCell):
    """The PNASNet-5 cell (stride 2 at the reduction points and in the stem); arguments as
    ``nasnet_utils.NasNetABaseCell`` without the topology."""

    OPERATIONS = (
        "separable_5x5_2",
        "max_pool_3x3",
        "separable_7x7_2",
        "max_pool_3x3",
        "separable_5x5_2",
        "separable_3x3_2",
        "separable_3x3_2",
        "max_pool_3x3",
        "separable_3x3_2",
        "none",
    )
    USED_HIDDENSTATES = (1, 1, 0, 0, 0, 0, 0)
    HIDDENSTATE_INDICES = (1, 1, 0, 0, 0, 0, 4, 0, 1, 0)


def _pnasnet_stages(
    images: tf.Tensor, num_classes: Optional[int], config: NasNetHParams, is_training: bool
) -> Iterator[nasnet_base.Stage]:
    """Stem, cells (stride 2 at each reduction point), aux head, classifier."""
    reductions = nasnet_utils.calc_reduction_layers(config.num_cells, config.num_reduction_layers)
    cell = PNasNetNormalCell(
        config.num_conv_filters,
        nasnet_base.drop_path_keep_prob(config, is_training),
        config.num_cells + nasnet_base.NUM_IMAGENET_STEM_CELLS,
        config.total_training_steps,
        config.use_bounded_activation,
    )
    aux_cell = nasnet_base.aux_head_cell(config, num_classes, is_training)
    outputs = nasnet_base.imagenet_stem(nasnet_base.to_data_format(images, config), config, cell, current_step=None)
    net = outputs[-1]
    yield "Stem", net

    filter_scaling = 1.0
    for cell_num in range(config.num_cells):
        is_reduction = cell_num in reductions
        if is_reduction:
            filter_scaling *= config.filter_scaling_rate
        # Without skip_reduction_layer_input the official code keeps the previous cell's
        # previous-layer input for a stride-2 cell, i.e. the output three steps back.
        reuse_older_input = is_reduction and not config.skip_reduction_layer_input
        net = cell(
            net,
            scope=f"cell_{cell_num}",
            filter_scaling=filter_scaling,
            stride=2 if is_reduction else 1,
            prev_layer=outputs[-3] if reuse_older_input else outputs[-2],
            cell_num=nasnet_base.NUM_IMAGENET_STEM_CELLS + cell_num,
        )
        outputs.append(net)
        yield f"Cell_{cell_num}", net
        if cell_num == aux_cell:
            yield "AuxLogits", nasnet_base.aux_head(net, num_classes, config, f"aux_{cell_num}")
    yield from nasnet_base.classifier_stages(net, num_classes, config)


def build_pnasnet_large(
    images: tf.Tensor,
    num_classes: Optional[int],
    is_training: bool = True,
    final_endpoint: Optional[str] = None,
    config: Optional[NasNetHParams] = None,
) -> Tuple[tf.Tensor, Dict[str, tf.Tensor]]:
    """PNASNet-5 Large for 331x331 ImageNet images.

    Args:
        images: ``[batch, 331, 331, 3]`` NHWC images (transposed here if ``config.data_format`` is NCHW).
        num_classes: classes of the logits layer; 0 or None for the pooled features only.
        is_training: training mode (batch statistics, dropout, drop-path, the auxiliary head).
        final_endpoint: stop after this end point and return it as the first value.
        config: hyper-parameters (``large_imagenet_config()`` when None); not modified.

    Returns:
        ``(logits, end_points)`` (the pooled features instead of logits without classes).

    Raises:
        ValueError: bad images, ``num_classes``, ``final_endpoint`` or configuration.
    """
    config = large_imagenet_config() if config is None else config
    nasnet_base.check_inputs(images, num_classes, config)
    stages = _pnasnet_stages(images, num_classes, config, is_training)
    return nasnet_base.build_network(stages, config, is_training, final_endpoint)


build_pnasnet_large.default_image_size = 331


def build_pnasnet_mobile(
    images: tf.Tensor,
    num_classes: Optional[int],
    is_training: bool = True,
    final_endpoint: Optional[str] = None,
    config: Optional[NasNetHParams] = None,
) -> Tuple[tf.Tensor, Dict[str, tf.Tensor]]:
    """PNASNet-5 Mobile for 224x224 ImageNet images; arguments as ``build_pnasnet_large``.

    ``config`` defaults to ``mobile_imagenet_config()``.
    """
    config = mobile_imagenet_config() if config is None else config
    nasnet_base.check_inputs(images, num_classes, config)
    stages = _pnasnet_stages(images, num_classes, config, is_training)
    return nasnet_base.build_network(stages, config, is_training, final_endpoint)


build_pnasnet_mobile.default_image_size = 224
