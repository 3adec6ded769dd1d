"""NASNet-A (Zoph et al., 2018) for CIFAR-10 and ImageNet, variable-compatible with the official TF-Slim checkpoints.

Also holds what PNASNet shares with it: the configuration, the ImageNet stem, the
auxiliary head, the classifier and the arg_scope. Variables live at the graph root
(``conv0``, ``cell_stem_0``, ``cell_0``, ``reduction_cell_0``, ``aux_7``, ``final_layer``).
"""

import contextlib
import numbers
import dataclasses
from typing import Dict, Iterator, List, Optional, Tuple

import tensorflow as tf
import tf_slim as slim

from nets import nasnet_cells

NUM_IMAGENET_STEM_CELLS = 2
_IMAGENET_STEM_FILTERS = 32
_MIN_AUX_INPUT_SIZE = 5

Stage = Tuple[str, tf.Tensor]


@dataclasses.dataclass(frozen=True)
class NasNetConfig:
    """Hyper-parameters of one NASNet or PNASNet variant (the official code's ``HParams``).

    ``num_cells`` counts the normal cells (NASNet) or all cells after the stem (PNASNet);
    ``skip_reduction_layer_input`` makes the cell after a reduction take its previous-layer
    input from before the reduction.
    """

    num_cells: int
    num_conv_filters: int
    stem_multiplier: float
    drop_path_keep_prob: float
    dense_dropout_keep_prob: float
    total_training_steps: int
    filter_scaling_rate: float = 2.0
    num_reduction_layers: int = 2
    use_aux_head: bool = True
    skip_reduction_layer_input: bool = False

    def __post_init__(self) -> None:
        for name in ("drop_path_keep_prob", "dense_dropout_keep_prob"):
            if not 0.0 < getattr(self, name) <= 1.0:
                raise ValueError(f"NasNetConfig.{name} must be in (0, 1], got {getattr(self, name)}.")


CIFAR_CONFIG = NasNetConfig(
    num_cells=18,
    num_conv_filters=32,
    stem_multiplier=3.0,
    drop_path_keep_prob=0.6,
    dense_dropout_keep_prob=1.0,
    total_training_steps=937500,
)
MOBILE_IMAGENET_CONFIG = NasNetConfig(
    num_cells=12,
    num_conv_filters=44,
    stem_multiplier=1.0,
    drop_path_keep_prob=1.0,
    dense_dropout_keep_prob=0.5,
    total_training_steps=250000,
)
LARGE_IMAGENET_CONFIG = NasNetConfig(
    num_cells=18,
    num_conv_filters=168,
    stem_multiplier=3.0,
    drop_path_keep_prob=0.7,
    dense_dropout_keep_prob=0.5,
    total_training_steps=250000,
    skip_reduction_layer_input=True,
)


def nasnet_arg_scope(weight_decay: float, batch_norm_decay: float, batch_norm_epsilon: float) -> dict:
    """Defaults of every NASNet/PNASNet layer: L2 decay, fan-out He init, no conv biases, scaled fused batch norm."""
    with slim.arg_scope(
        [slim.fully_connected, slim.conv2d, slim.separable_conv2d],
        weights_regularizer=slim.l2_regularizer(weight_decay),
        weights_initializer=slim.variance_scaling_initializer(mode="FAN_OUT"),
    ):
        with slim.arg_scope([slim.fully_connected], activation_fn=None):
            with slim.arg_scope([slim.conv2d, slim.separable_conv2d], activation_fn=None, biases_initializer=None):
                with slim.arg_scope(
                    [slim.batch_norm], decay=batch_norm_decay, epsilon=batch_norm_epsilon, scale=True, fused=True
                ) as scope:
                    return scope


def nasnet_cifar_arg_scope(
    weight_decay: float = 5e-4, batch_norm_decay: float = 0.9, batch_norm_epsilon: float = 1e-5
) -> dict:
    """arg_scope of NASNet-A CIFAR with its official defaults."""
    return nasnet_arg_scope(weight_decay, batch_norm_decay, batch_norm_epsilon)


def nasnet_mobile_arg_scope(
    weight_decay: float = 4e-5, batch_norm_decay: float = 0.9997, batch_norm_epsilon: float = 1e-3
) -> dict:
    """arg_scope of NASNet-A Mobile with its official defaults."""
    return nasnet_arg_scope(weight_decay, batch_norm_decay, batch_norm_epsilon)


def nasnet_large_arg_scope(
    weight_decay: float = 5e-5, batch_norm_decay: float = 0.9997, batch_norm_epsilon: float = 1e-3
) -> dict:
    """arg_scope of NASNet-A Large with its official defaults."""
    return nasnet_arg_scope(weight_decay, batch_norm_decay, batch_norm_epsilon)


def reduction_layer_indices(num_cells: int, num_reduction_layers: int) -> List[int]:
    """Cell numbers at which the resolution halves: evenly spaced through the ``num_cells`` cells."""
    return [int(pool / (num_reduction_layers + 1) * num_cells) for pool in range(1, num_reduction_layers + 1)]


def aux_head_cell(config: NasNetConfig, num_classes: Optional[int], is_training: bool) -> Optional[int]:
    """The cell whose output feeds the auxiliary head (the one before the second reduction), if any is built."""
    reductions = reduction_layer_indices(config.num_cells, config.num_reduction_layers)
    if not (config.use_aux_head and num_classes and is_training and len(reductions) >= 2):
        return None
    return reductions[1] - 1


def drop_path_schedule(
    config: NasNetConfig, total_num_cells: int, is_training: bool, current_step: Optional[tf.Tensor]
) -> nasnet_cells.DropPathSchedule:
    """Drop-path settings of a network; evaluation graphs get none."""
    keep_prob = config.drop_path_keep_prob if is_training else 1.0
    return nasnet_cells.DropPathSchedule(keep_prob, total_num_cells, config.total_training_steps, current_step)


def imagenet_stem(
    images: tf.Tensor,
    config: NasNetConfig,
    stem_spec: nasnet_cells.CellSpec,
    schedule: nasnet_cells.DropPathSchedule,
) -> List[Optional[tf.Tensor]]:
    """A stride-2 3x3 conv then two stride-2 cells at 1/4 and 1/2 of the cell width.

    Returns the hidden-state history ``[None, conv0, cell_stem_0, cell_stem_1]`` the
    following cells draw their previous-layer inputs from.
    """
    net = slim.conv2d(
        images, int(_IMAGENET_STEM_FILTERS * config.stem_multiplier), 3, stride=2, padding="VALID", scope="conv0"
    )
    outputs = [None, slim.batch_norm(net, scope="conv0_bn")]
    filter_scaling = 1.0 / config.filter_scaling_rate**NUM_IMAGENET_STEM_CELLS
    for stem_index in range(NUM_IMAGENET_STEM_CELLS):
        outputs.append(
            nasnet_cells.build_cell(
                outputs[-1],
                outputs[-2],
                stem_spec,
                scope=f"cell_stem_{stem_index}",
                num_filters=int(config.num_conv_filters * filter_scaling),
                stride=2,
                cell_index=stem_index,
                drop_path_schedule=schedule,
            )
        )
        filter_scaling *= config.filter_scaling_rate
    return outputs


def _cifar_stem(images: tf.Tensor, config: NasNetConfig) -> List[Optional[tf.Tensor]]:
    """A 3x3 conv at full resolution; returns the hidden-state history ``[None, stem]``."""
    net = slim.conv2d(images, int(config.num_conv_filters * config.stem_multiplier), 3, scope="l1_stem_3x3")
    return [None, slim.batch_norm(net, scope="l1_stem_bn")]


def aux_head(net: tf.Tensor, num_classes: int, scope: str) -> tf.Tensor:
    """Auxiliary classifier on an intermediate cell output: pool, 1x1 conv, full-size conv, fully connected."""
    height, width = net.shape[1:3].as_list()
    if min(height, width) < _MIN_AUX_INPUT_SIZE:
        raise ValueError(
            f"images are too small for the auxiliary head at {scope} (its input is {height}x{width}, it needs "
            f"at least {_MIN_AUX_INPUT_SIZE}x{_MIN_AUX_INPUT_SIZE}); pass larger images or is_training=False."
        )
    with tf.compat.v1.variable_scope(scope), tf.compat.v1.variable_scope("aux_logits"):
        net = slim.avg_pool2d(tf.nn.relu(net), 5, stride=3, padding="VALID")
        net = tf.nn.relu(slim.batch_norm(slim.conv2d(net, 128, 1, scope="proj"), scope="aux_bn0"))
        net = slim.conv2d(net, 768, net.shape[1:3].as_list(), padding="VALID", scope="Conv")
        net = tf.nn.relu(slim.batch_norm(net, scope="aux_bn1"))
        return slim.fully_connected(slim.flatten(net), num_classes, scope="FC")


def classifier_stages(net: tf.Tensor, num_classes: Optional[int], dropout_keep_prob: float) -> Iterator[Stage]:
    """Global average pool, then (when ``num_classes``) dropout, the logits layer and softmax, under ``final_layer``."""
    with tf.compat.v1.variable_scope("final_layer"):
        pooled = tf.reduce_mean(tf.nn.relu(net), [1, 2])
        yield "global_pool", pooled
        if not num_classes:
            return
        logits = slim.fully_connected(slim.dropout(pooled, dropout_keep_prob, scope="dropout"), num_classes, scope="FC")
        yield "Logits", logits
        yield "Predictions", tf.nn.softmax(logits, name="predictions")


def check_inputs(images: tf.Tensor, num_classes: Optional[int], config: NasNetConfig) -> None:
    """Reject inputs the cell networks cannot be built on, with a message naming the fix."""
    if images.shape.rank != 4 or None in images.shape[1:].as_list():
        raise ValueError(
            f"images must be a 4-D NHWC tensor with known height, width and channels, got shape {images.shape}."
        )
    if num_classes is not None and (not isinstance(num_classes, numbers.Integral) or num_classes < 0):
        raise ValueError(f"num_classes must be a non-negative int (0 or None for features only), got {num_classes!r}.")
    if not isinstance(config, NasNetConfig):
        raise TypeError(f"config must be a NasNetConfig (or None for the default), got {type(config).__name__}.")


def build_network(
    stages: Iterator[Stage], is_training: bool, final_endpoint: Optional[str]
) -> Tuple[tf.Tensor, Dict[str, tf.Tensor]]:
    """Build ``stages`` in training or inference mode, stopping after ``final_endpoint``.

    Returns that end point (by default the logits, or the pooled features without
    classes) and the dict of end points built.
    """
    end_points = {}
    with slim.arg_scope([slim.dropout, slim.batch_norm], is_training=is_training), contextlib.closing(stages):
        for name, tensor in stages:
            end_points[name] = tensor
            if name == final_endpoint:
                return tensor, end_points
    if final_endpoint is not None:
        raise ValueError(
            f"final_endpoint {final_endpoint!r} is not an end point of this network; use one of {list(end_points)}."
        )
    return end_points.get("Logits", end_points["global_pool"]), end_points


def _nasnet_stages(
    images: tf.Tensor,
    num_classes: Optional[int],
    config: NasNetConfig,
    is_training: bool,
    imagenet: bool,
    current_step: Optional[tf.Tensor],
) -> Iterator[Stage]:
    """Stem, normal cells with a reduction cell before each resolution drop, aux head, classifier."""
    num_stem_cells = NUM_IMAGENET_STEM_CELLS if imagenet else 0
    reductions = reduction_layer_indices(config.num_cells, config.num_reduction_layers)
    total_num_cells = config.num_cells + len(reductions) + num_stem_cells
    schedule = drop_path_schedule(config, total_num_cells, is_training, current_step)
    aux_cell = aux_head_cell(config, num_classes, is_training)
    if imagenet:
        outputs = imagenet_stem(images, config, nasnet_cells.NASNET_A_REDUCTION, schedule)
    else:
        outputs = _cifar_stem(images, config)
    net = outputs[-1]
    yield "Stem", net

    cell_index = num_stem_cells
    filter_scaling = 1.0
    for cell_num in range(config.num_cells):
        layer_before_reduction = outputs[-2]
        if cell_num in reductions:
            filter_scaling *= config.filter_scaling_rate
            reduction_num = reductions.index(cell_num)
            net = nasnet_cells.build_cell(
                net,
                outputs[-2],
                nasnet_cells.NASNET_A_REDUCTION,
                scope=f"reduction_cell_{reduction_num}",
                num_filters=int(config.num_conv_filters * filter_scaling),
                stride=2,
                cell_index=cell_index,
                drop_path_schedule=schedule,
            )
            cell_index += 1
            outputs.append(net)
            yield f"Reduction_Cell_{reduction_num}", net
        net = nasnet_cells.build_cell(
            net,
            layer_before_reduction if config.skip_reduction_layer_input else outputs[-2],
            nasnet_cells.NASNET_A_NORMAL,
            scope=f"cell_{cell_num}",
            num_filters=int(config.num_conv_filters * filter_scaling),
            stride=1,
            cell_index=cell_index,
            drop_path_schedule=schedule,
        )
        cell_index += 1
        outputs.append(net)
        yield f"Cell_{cell_num}", net
        if cell_num == aux_cell:
            yield "AuxLogits", aux_head(net, num_classes, f"aux_{cell_num}")
    yield from classifier_stages(net, num_classes, config.dense_dropout_keep_prob)


def build_nasnet_cifar(
    images: tf.Tensor,
    num_classes: Optional[int] = 1001,
    is_training: bool = True,
    config: Optional[NasNetConfig] = None,
    current_step: Optional[tf.Tensor] = None,
) -> Tuple[tf.Tensor, Dict[str, tf.Tensor]]:
    """NASNet-A 6@768 for 32x32 images; returns ``(logits, end_points)``.

    ``current_step`` drives the drop-path schedule (the global step when None).
    """
    config = CIFAR_CONFIG if config is None else config
    check_inputs(images, num_classes, config)
    stages = _nasnet_stages(images, num_classes, config, is_training, imagenet=False, current_step=current_step)
    return build_network(stages, is_training, final_endpoint=None)


build_nasnet_cifar.default_image_size = 32


def build_nasnet_mobile(
    images: tf.Tensor,
    num_classes: Optional[int] = 1001,
    is_training: bool = True,
    final_endpoint: Optional[str] = None,
    config: Optional[NasNetConfig] = None,
    current_step: Optional[tf.Tensor] = None,
) -> Tuple[tf.Tensor, Dict[str, tf.Tensor]]:
    """NASNet-A 4@1056 for 224x224 ImageNet images; returns ``(logits, end_points)``."""
    config = MOBILE_IMAGENET_CONFIG if config is None else config
    check_inputs(images, num_classes, config)
    stages = _nasnet_stages(images, num_classes, config, is_training, imagenet=True, current_step=current_step)
    return build_network(stages, is_training, final_endpoint)


build_nasnet_mobile.default_image_size = 224


def build_nasnet_large(
    images: tf.Tensor,
    num_classes: Optional[int] = 1001,
    is_training: bool = True,
    final_endpoint: Optional[str] = None,
    config: Optional[NasNetConfig] = None,
    current_step: Optional[tf.Tensor] = None,
) -> Tuple[tf.Tensor, Dict[str, tf.Tensor]]:
    """NASNet-A 6@4032 for 331x331 ImageNet images; returns ``(logits, end_points)``."""
    config = LARGE_IMAGENET_CONFIG if config is None else config
    check_inputs(images, num_classes, config)
    stages = _nasnet_stages(images, num_classes, config, is_training, imagenet=True, current_step=current_step)
    return build_network(stages, is_training, final_endpoint)


build_nasnet_large.default_image_size = 331
