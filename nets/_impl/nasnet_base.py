"""What NASNet-A and PNASNet-5 share: the editable configuration, the arg_scope, the ImageNet
stem, the auxiliary head, the classifier and the staged build with ``final_endpoint``.

Variables live at the graph root (``conv0``, ``cell_stem_0``, ``aux_7``, ``final_layer``), as in
the official checkpoints.
"""

import contextlib
import dataclasses
import numbers
from typing import Callable, Dict, Iterator, List, Optional, Tuple

import tensorflow as tf
import tf_slim as slim

from nets._impl import nasnet_cells

NUM_IMAGENET_STEM_CELLS = 2
_IMAGENET_STEM_FILTERS = 32
_MIN_AUX_INPUT_SIZE = 5

Stage = Tuple[str, tf.Tensor]
Cell = Callable[..., tf.Tensor]


@dataclasses.dataclass
class NasNetHParams:
    """Hyper-parameters of one NASNet or PNASNet variant, with the official ``HParams`` fields.

    Users edit them with ``set_hparam(name, value)`` (or attribute assignment) before building.
    ``num_cells`` counts the normal cells (NASNet) or all cells after the stem (PNASNet);
    ``skip_reduction_layer_input`` makes the cell after a reduction take its previous-layer
    input from before the reduction; ``use_aux_head`` and ``skip_reduction_layer_input`` are
    0/1 integers as in the official configurations.
    """

    stem_multiplier: float
    drop_path_keep_prob: float
    num_cells: int
    use_aux_head: int
    num_conv_filters: int
    dense_dropout_keep_prob: float
    filter_scaling_rate: float
    num_reduction_layers: int
    data_format: str
    skip_reduction_layer_input: int
    total_training_steps: int
    use_bounded_activation: bool

    def set_hparam(self, name: str, value) -> None:
        """Set field ``name`` to ``value`` (an int is accepted for a float field).

        Raises:
            KeyError: ``name`` is not a field.
            ValueError: ``value`` has the wrong type for the field.
        """
        fields = {field.name: field.type for field in dataclasses.fields(self)}
        if name not in fields:
            raise KeyError(f"{name!r} is not a NASNet hyper-parameter; use one of {sorted(fields)}.")
        setattr(self, name, _coerce(name, fields[name], value))

    def override_from_dict(self, values: Dict[str, object]) -> "NasNetHParams":
        """Set every ``name: value`` of ``values`` (as ``set_hparam``); returns self."""
        for name, value in values.items():
            self.set_hparam(name, value)
        return self

    def values(self) -> Dict[str, object]:
        """The fields as a ``{name: value}`` dict."""
        return dataclasses.asdict(self)


# The hyper-parameters every official NASNet and PNASNet configuration shares.
_COMMON_HPARAMS = dict(
    use_aux_head=1, filter_scaling_rate=2.0, num_reduction_layers=2, data_format="NHWC", use_bounded_activation=False
)


def nasnet_hparams(**values) -> NasNetHParams:
    """A fresh NasNetHParams of ``values`` and the settings all official configurations share."""
    return NasNetHParams(**{**_COMMON_HPARAMS, **values})


def _coerce(name: str, field_type: type, value):
    """``value`` as ``field_type``, or a ValueError naming the field."""
    is_bool = isinstance(value, bool)
    if field_type is bool and is_bool:
        return value
    if field_type is int and isinstance(value, numbers.Integral) and not is_bool:
        return int(value)
    if field_type is float and isinstance(value, numbers.Real) and not is_bool:
        return float(value)
    if field_type is str and isinstance(value, str):
        return value
    raise ValueError(f"hyper-parameter {name} takes a {field_type.__name__}, got {value!r}.")


def check_config(config: NasNetHParams) -> None:
    """Reject configurations no network can be built from, naming the field to fix."""
    if not isinstance(config, NasNetHParams):
        raise TypeError(
            f"config must be a NasNetHParams from one of the *_config() functions (or None), "
            f"got {type(config).__name__}."
        )
    for name in ("drop_path_keep_prob", "dense_dropout_keep_prob"):
        if not 0.0 < getattr(config, name) <= 1.0:
            raise ValueError(f"config.{name} must be in (0, 1], got {getattr(config, name)}.")
    for name in ("num_cells", "num_conv_filters", "total_training_steps"):
        if getattr(config, name) < 1:
            raise ValueError(f"config.{name} must be at least 1, got {getattr(config, name)}.")
    if config.data_format not in (nasnet_cells.DATA_FORMAT_NHWC, nasnet_cells.DATA_FORMAT_NCHW):
        raise ValueError(f"config.data_format must be 'NHWC' or 'NCHW', got {config.data_format!r}.")


def check_inputs(images: tf.Tensor, num_classes: Optional[int], config: NasNetHParams) -> None:
    """Reject inputs the cell networks cannot be built on, with a message naming the fix."""
    if images.shape.rank != 4 or None in images.shape[1:].as_list():
        raise ValueError(
            f"images must be a 4-D NHWC tensor with known height, width and channels, got shape {images.shape}."
        )
    if num_classes is not None and (not isinstance(num_classes, numbers.Integral) or num_classes < 0):
        raise ValueError(f"num_classes must be a non-negative int (0 or None for features only), got {num_classes!r}.")
    check_config(config)


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


@contextlib.contextmanager
def network_scope(config: NasNetHParams, is_training: bool) -> Iterator[None]:
    """Training mode for dropout, drop-path and batch norm; ``config.data_format`` for every layout-aware op."""
    layout_ops = [
        slim.avg_pool2d,
        slim.max_pool2d,
        slim.conv2d,
        slim.batch_norm,
        slim.separable_conv2d,
        nasnet_cells.factorized_reduction,
        nasnet_cells.global_avg_pool,
        nasnet_cells.get_channel_index,
        nasnet_cells.get_channel_dim,
    ]
    with slim.arg_scope([slim.dropout, nasnet_cells.drop_path, slim.batch_norm], is_training=is_training):
        with slim.arg_scope(layout_ops, data_format=config.data_format):
            yield


def to_data_format(images: tf.Tensor, config: NasNetHParams) -> tf.Tensor:
    """NHWC ``images`` in the layout of ``config`` (transposed for NCHW)."""
    if config.data_format == nasnet_cells.DATA_FORMAT_NCHW:
        return tf.transpose(images, [0, 3, 1, 2])
    return images


def drop_path_keep_prob(config: NasNetHParams, is_training: bool) -> float:
    """The configured drop-path keep probability in training; evaluation graphs get none (1.0)."""
    return config.drop_path_keep_prob if is_training else 1.0


def aux_head_cell(config: NasNetHParams, num_classes: Optional[int], is_training: bool) -> Optional[int]:
    """The cell whose output feeds the auxiliary head (the one before the second reduction), if any is built."""
    reductions = nasnet_cells.calc_reduction_layers(config.num_cells, config.num_reduction_layers)
    if not (config.use_aux_head and num_classes and is_training and len(reductions) >= 2):
        return None
    return reductions[1] - 1


def imagenet_stem(
    images: tf.Tensor, config: NasNetHParams, stem_cell: Cell, current_step: Optional[tf.Tensor]
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
            stem_cell(
                outputs[-1],
                scope=f"cell_stem_{stem_index}",
                filter_scaling=filter_scaling,
                stride=2,
                prev_layer=outputs[-2],
                cell_num=stem_index,
                current_step=current_step,
            )
        )
        filter_scaling *= config.filter_scaling_rate
    return outputs


def aux_head(net: tf.Tensor, num_classes: int, config: NasNetHParams, scope: str) -> tf.Tensor:
    """Auxiliary classifier on an intermediate cell output: pool, 1x1 conv, full-size conv, fully connected."""
    height, width = nasnet_cells.spatial_shape(net)
    if min(height, width) < _MIN_AUX_INPUT_SIZE:
        raise ValueError(
            f"images are too small for the auxiliary head at {scope} (its input is {height}x{width}, it needs "
            f"at least {_MIN_AUX_INPUT_SIZE}x{_MIN_AUX_INPUT_SIZE}); pass larger images or is_training=False."
        )
    activation = nasnet_cells.activation(config.use_bounded_activation)
    with tf.compat.v1.variable_scope(scope), tf.compat.v1.variable_scope("aux_logits"):
        net = slim.avg_pool2d(activation(net), 5, stride=3, padding="VALID")
        net = activation(slim.batch_norm(slim.conv2d(net, 128, 1, scope="proj"), scope="aux_bn0"))
        net = slim.conv2d(net, 768, nasnet_cells.spatial_shape(net), padding="VALID", scope="Conv")
        net = activation(slim.batch_norm(net, scope="aux_bn1"))
        return slim.fully_connected(slim.flatten(net), num_classes, scope="FC")


def classifier_stages(net: tf.Tensor, num_classes: Optional[int], config: NasNetHParams) -> Iterator[Stage]:
    """Global average pool, then (when ``num_classes``) dropout, the logits layer and softmax, under ``final_layer``."""
    with tf.compat.v1.variable_scope("final_layer"):
        activation = nasnet_cells.activation(config.use_bounded_activation)
        pooled = nasnet_cells.global_avg_pool(activation(net))
        yield "global_pool", pooled
        if not num_classes:
            return
        dropped = slim.dropout(pooled, config.dense_dropout_keep_prob, scope="dropout")
        logits = slim.fully_connected(dropped, num_classes, scope="FC")
        yield "Logits", logits
        yield "Predictions", tf.nn.softmax(logits, name="predictions")


def build_network(
    stages: Iterator[Stage], config: NasNetHParams, is_training: bool, final_endpoint: Optional[str]
) -> Tuple[tf.Tensor, Dict[str, tf.Tensor]]:
    """Build ``stages`` in ``network_scope(config, is_training)``, stopping after ``final_endpoint``.

    Returns that end point (by default the logits, or the pooled features without
    classes) and the dict of end points built.
    """
    end_points = {}
    with network_scope(config, is_training), contextlib.closing(stages):
        for name, tensor in stages:
            end_points[name] = tensor
            if name == final_endpoint:
                return tensor, end_points
    if final_endpoint is not None:
        raise ValueError(
            f"final_endpoint {final_endpoint!r} is not an end point of this network; use one of {list(end_points)}."
        )
    return end_points.get("Logits", end_points["global_pool"]), end_points
