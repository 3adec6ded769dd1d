"""PNASNet-5 (Liu et al., 2018) for ImageNet, variable-compatible with the official TF-Slim checkpoints.

PNASNet reuses NASNet's stem, auxiliary head and classifier, but has a single cell
type: it halves the resolution with stride-2 copies of its normal cell instead of
separate reduction cells.
"""

from typing import Dict, Iterator, Optional, Tuple

import tensorflow as tf

from nets import nasnet, nasnet_cells

LARGE_IMAGENET_CONFIG = nasnet.NasNetConfig(
    num_cells=12,
    num_conv_filters=216,
    stem_multiplier=3.0,
    drop_path_keep_prob=0.6,
    dense_dropout_keep_prob=0.5,
    total_training_steps=250000,
    skip_reduction_layer_input=True,
)
MOBILE_IMAGENET_CONFIG = nasnet.NasNetConfig(
    num_cells=9,
    num_conv_filters=54,
    stem_multiplier=1.0,
    drop_path_keep_prob=1.0,
    dense_dropout_keep_prob=0.5,
    total_training_steps=250000,
    skip_reduction_layer_input=True,
)


def pnasnet_large_arg_scope(
    weight_decay: float = 4e-5, batch_norm_decay: float = 0.9997, batch_norm_epsilon: float = 1e-3
) -> dict:
    """arg_scope of PNASNet-5 Large with its official defaults."""
    return nasnet.nasnet_arg_scope(weight_decay, batch_norm_decay, batch_norm_epsilon)


def pnasnet_mobile_arg_scope(
    weight_decay: float = 4e-5, batch_norm_decay: float = 0.9997, batch_norm_epsilon: float = 1e-3
) -> dict:
    """arg_scope of PNASNet-5 Mobile with its official defaults."""
    return nasnet.nasnet_arg_scope(weight_decay, batch_norm_decay, batch_norm_epsilon)


def _pnasnet_stages(
    images: tf.Tensor, num_classes: Optional[int], config: nasnet.NasNetConfig, is_training: bool
) -> Iterator[nasnet.Stage]:
    """Stem, cells (stride 2 at each reduction point), aux head, classifier."""
    reductions = nasnet.reduction_layer_indices(config.num_cells, config.num_reduction_layers)
    total_num_cells = config.num_cells + nasnet.NUM_IMAGENET_STEM_CELLS
    schedule = nasnet.drop_path_schedule(config, total_num_cells, is_training, current_step=None)
    aux_cell = nasnet.aux_head_cell(config, num_classes, is_training)
    outputs = nasnet.imagenet_stem(images, config, nasnet_cells.PNASNET_5, schedule)
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
        net = nasnet_cells.build_cell(
            net,
            outputs[-3] if reuse_older_input else outputs[-2],
            nasnet_cells.PNASNET_5,
            scope=f"cell_{cell_num}",
            num_filters=int(config.num_conv_filters * filter_scaling),
            stride=2 if is_reduction else 1,
            cell_index=nasnet.NUM_IMAGENET_STEM_CELLS + cell_num,
            drop_path_schedule=schedule,
        )
        outputs.append(net)
        yield f"Cell_{cell_num}", net
        if cell_num == aux_cell:
            yield "AuxLogits", nasnet.aux_head(net, num_classes, f"aux_{cell_num}")
    yield from nasnet.classifier_stages(net, num_classes, config.dense_dropout_keep_prob)


def build_pnasnet_large(
    images: tf.Tensor,
    num_classes: Optional[int] = 1001,
    is_training: bool = True,
    final_endpoint: Optional[str] = None,
    config: Optional[nasnet.NasNetConfig] = None,
) -> Tuple[tf.Tensor, Dict[str, tf.Tensor]]:
    """PNASNet-5 Large for 331x331 ImageNet images; returns ``(logits, end_points)``."""
    config = LARGE_IMAGENET_CONFIG if config is None else config
    nasnet.check_inputs(images, num_classes, config)
    return nasnet.build_network(_pnasnet_stages(images, num_classes, config, is_training), is_training, final_endpoint)


build_pnasnet_large.default_image_size = 331


def build_pnasnet_mobile(
    images: tf.Tensor,
    num_classes: Optional[int] = 1001,
    is_training: bool = True,
    final_endpoint: Optional[str] = None,
    config: Optional[nasnet.NasNetConfig] = None,
) -> Tuple[tf.Tensor, Dict[str, tf.Tensor]]:
    """PNASNet-5 Mobile for 224x224 ImageNet images; returns ``(logits, end_points)``."""
    config = MOBILE_IMAGENET_CONFIG if config is None else config
    nasnet.check_inputs(images, num_classes, config)
    return nasnet.build_network(_pnasnet_stages(images, num_classes, config, is_training), is_training, final_endpoint)


build_pnasnet_mobile.default_image_size = 224
