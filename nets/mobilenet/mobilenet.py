"""The conv-def network builder of MobileNet v2/v3 (official ``nets.mobilenet.mobilenet``).

A conv def is a dict: ``spec``, a list of ``op(function, **params)`` layers;
``defaults`` and optional ``overrides``, mappings from a tuple of functions to
default arguments, applied as ``slim.arg_scope``s around the whole network.
``mobilenet_base`` builds the layers (end points ``layer_1``, ``layer_2``, ...
plus each layer's tensors named ``*output``, e.g. ``layer_3/expansion_output``),
scaling every layer's ``num_outputs`` by its ``multiplier_func``
(``depth_multiplier`` unless the op says otherwise). ``mobilenet`` adds the
pooled 1x1 classifier. Both build inference networks unless
``training_scope()`` (or ``is_training=True``) says otherwise.
"""

import os
from typing import Callable, Dict, NamedTuple, Optional, Tuple

import tensorflow as tf
import tf_slim as slim

from nets._impl.mobilenet_layers import (
    arg_scope_defaults,
    average_pool,
    fixed_padding,
    make_divisible,
    variable_and_name_scope,
)

EndPoints = Dict[str, tf.Tensor]


@slim.add_arg_scope
def apply_activation(x: tf.Tensor, name: Optional[str] = None, activation_fn: Optional[Callable] = None) -> tf.Tensor:
    """``activation_fn(x, name=name)``, or ``x`` itself without an activation (settable by arg scope)."""
    return activation_fn(x, name=name) if activation_fn else x


@slim.add_arg_scope
def depth_multiplier(
    output_params: dict, multiplier: float, divisible_by: int = 8, min_depth: int = 8, **unused_kwargs
) -> None:
    """Scale ``output_params['num_outputs']`` (if present) by ``multiplier``, in place, with the official rounding.

    The default ``multiplier_func`` of every ``op``; ``divisible_by`` and
    ``min_depth`` can be set for a whole network with
    ``slim.arg_scope([depth_multiplier], ...)``.
    """
    if "num_outputs" in output_params:
        output_params["num_outputs"] = make_divisible(
            output_params["num_outputs"] * multiplier, divisible_by, min_depth
        )


class _Op(NamedTuple):
    """One layer of a conv def: the layer function, its keyword arguments, and how depths scale."""

    op: Callable
    params: dict
    multiplier_func: Callable


def op(opfunc: Callable, multiplier_func: Callable = depth_multiplier, **params) -> _Op:
    """A conv-def layer: ``opfunc(net, **params)``, with depths scaled by ``multiplier_func(params, multiplier)``.

    The older keyword ``multiplier_transform`` is accepted for ``multiplier_func``.
    """
    return _Op(opfunc, params=params, multiplier_func=params.pop("multiplier_transform", multiplier_func))


class NoOpScope:
    """A context manager that does nothing (what ``safe_arg_scope`` returns when no argument is set)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type, exc_value, traceback) -> bool:
        return False


def safe_arg_scope(funcs, **kwargs):
    """``slim.arg_scope(funcs, **kwargs)`` without the None-valued arguments (a no-op scope if none is left).

    None thus means "keep whatever an enclosing scope set", e.g. for ``is_training``.
    """
    given = {name: value for name, value in kwargs.items() if value is not None}
    return slim.arg_scope(funcs, **given) if given else NoOpScope()


def _atrous_params(params: dict, layer_stride: int, layer_rate: int) -> None:
    """Set the layer's stride, and its dilation rate when that is above 1 and the kernel is not 1x1."""
    params["stride"] = layer_stride
    if layer_rate > 1 and tuple(params.get("kernel_size", [])) != (1, 1):
        params["rate"] = layer_rate


def _output_taps(graph: tf.Graph, first_op: int, layer_output: tf.Tensor) -> Dict[str, tf.Tensor]:
    """Tensors named ``*output`` that the layer created in its own name scope, keyed by their base name."""
    layer_scope = os.path.dirname(layer_output.name)
    return {
        os.path.basename(operation.name): operation.outputs[0]
        for operation in graph.get_operations()[first_op:]
        if os.path.dirname(operation.name) == layer_scope and operation.name.endswith("output")
    }


@slim.add_arg_scope
def mobilenet_base(
    inputs: tf.Tensor,
    conv_defs: dict,
    multiplier: float = 1.0,
    final_endpoint: Optional[str] = None,
    output_stride: Optional[int] = None,
    use_explicit_padding: bool = False,
    scope: Optional[str] = None,
    is_training: Optional[bool] = False,
) -> Tuple[tf.Tensor, EndPoints]:
    """Build the layers of ``conv_defs`` on ``inputs`` up to ``final_endpoint``; return ``(net, end_points)``.

    Args:
      inputs: [batch, height, width, channels] input.
      conv_defs: the conv def (``spec``, ``defaults``, optional ``overrides``).
      multiplier: depth multiplier (> 0) passed to every layer's ``multiplier_func``.
      final_endpoint: stop after this layer (``layer_<n>``); None builds all.
      output_stride: cap on the total downsampling (None, 1 or an even number):
        once reached, later strides become atrous rates.
      use_explicit_padding: pad explicitly and convolve with VALID padding, so
        the output does not depend on the parity of the input size.
      scope: variable scope (default ``Mobilenet``).
      is_training: batch-norm mode; None leaves it to the enclosing arg scope.

    Returns:
      The last built layer's output and the end points.

    Raises:
      ValueError: ``multiplier`` <= 0 or an invalid ``output_stride``.
    """
    if multiplier <= 0:
        raise ValueError(f"multiplier is not greater than zero (got {multiplier}); pass a positive value.")
    if output_stride is not None and (output_stride == 0 or (output_stride > 1 and output_stride % 2)):
        raise ValueError(f"Output stride must be None, 1 or a multiple of 2 (got {output_stride}).")
    overrides = dict(conv_defs.get("overrides", {}))
    if use_explicit_padding:
        overrides[(slim.conv2d, slim.separable_conv2d)] = {"padding": "VALID"}
    end_points: EndPoints = {}
    layer_taps: Dict[str, Dict[str, tf.Tensor]] = {}
    with variable_and_name_scope(scope, "Mobilenet"), safe_arg_scope(
        [slim.batch_norm], is_training=is_training
    ), arg_scope_defaults(conv_defs.get("defaults", {})), arg_scope_defaults(overrides):
        current_stride, rate = 1, 1
        net = inputs
        for index, layer in enumerate(conv_defs["spec"]):
            params = dict(layer.params)
            layer.multiplier_func(params, multiplier)
            stride = params.get("stride", 1)
            if output_stride is not None and current_stride == output_stride:
                layer_stride, layer_rate = 1, rate
                rate *= stride
            else:
                layer_stride, layer_rate = stride, 1
                current_stride *= stride
            _atrous_params(params, layer_stride, layer_rate)
            if use_explicit_padding:
                if "kernel_size" in params:
                    net = fixed_padding(net, params["kernel_size"], layer_rate)
                else:
                    params["use_explicit_padding"] = True
            name = f"layer_{index + 1}"
            first_op = len(net.graph.get_operations())
            net = layer.op(net, **params)
            end_points[name] = net
            layer_taps[name] = _output_taps(net.graph, first_op, net)
            if name == final_endpoint:
                break
    for name, taps in layer_taps.items():
        end_points.update({f"{name}/{tap}": tensor for tap, tensor in taps.items()})
    return net, end_points


def global_pool(input_tensor: tf.Tensor, pool_op: Callable = tf.compat.v1.nn.avg_pool) -> tf.Tensor:
    """Average ``input_tensor`` to [batch, 1, 1, depth] with one ``pool_op`` over the whole map.

    An average pool is better supported by accelerators than ``tf.reduce_mean``. The default pool op
    is named ``AvgPool``, as the official graph's (``MobilenetV2/Logits/AvgPool``, which users fetch
    features from); when height or width is unknown a ``tf.reduce_mean`` named ``AvgPool`` takes its place.
    """
    pooled = average_pool(input_tensor, pool_op, mean_name="AvgPool")
    pooled.set_shape([None, 1, 1, None])
    return pooled


@slim.add_arg_scope
def mobilenet(
    inputs: tf.Tensor,
    num_classes: Optional[int] = 1001,
    prediction_fn: Optional[Callable] = slim.softmax,
    reuse: Optional[bool] = None,
    scope: str = "Mobilenet",
    base_only: bool = False,
    use_reduce_mean_for_pooling: bool = False,
    **mobilenet_args,
) -> Tuple[tf.Tensor, EndPoints]:
    """A MobileNet classifier: ``mobilenet_base``, global pool, dropout and the 1x1 ``Logits/Conv2d_1c_1x1``.

    Args:
      inputs: [batch, height, width, channels] input.
      num_classes: classes; 0 or None returns the pooled features (end point ``global_pool``).
      prediction_fn: turns the logits into the ``Predictions`` end point (None: no predictions).
      reuse: reuse the variables of ``scope``.
      scope: variable scope.
      base_only: return the ``mobilenet_base`` output (no pooling, no logits).
      use_reduce_mean_for_pooling: pool with ``tf.reduce_mean`` instead of an average pool.
      **mobilenet_args: passed to ``mobilenet_base`` (``conv_defs``, ``multiplier``,
        ``final_endpoint``, ``output_stride``, ``use_explicit_padding``,
        ``is_training``, which also switches dropout on).

    Returns:
      ``(logits, end_points)``; logits are [batch, num_classes].

    Raises:
      ValueError: ``inputs`` is not of rank 4.
    """
    is_training = mobilenet_args.get("is_training", False)
    rank = len(inputs.shape.as_list())
    if rank != 4:
        raise ValueError(f"Expected rank 4 input, was: {rank}")
    with tf.compat.v1.variable_scope(scope, "Mobilenet", reuse=reuse) as network_scope:
        inputs = tf.identity(inputs, "input")
        net, end_points = mobilenet_base(inputs, scope=network_scope, **mobilenet_args)
        if base_only:
            return net, end_points
        net = tf.identity(net, name="embedding")
        with tf.compat.v1.variable_scope("Logits"):
            if use_reduce_mean_for_pooling:
                net = tf.reduce_mean(net, [1, 2], keepdims=True, name="ReduceMean")
            else:
                net = global_pool(net)
            end_points["global_pool"] = net
            if not num_classes:
                return net, end_points
            net = slim.dropout(net, scope="Dropout", is_training=is_training)
            logits = slim.conv2d(
                net, num_classes, [1, 1], activation_fn=None, normalizer_fn=None,
                biases_initializer=tf.compat.v1.zeros_initializer(), scope="Conv2d_1c_1x1",
            )
            logits = tf.identity(tf.squeeze(logits, [1, 2]), name="output")
        end_points["Logits"] = logits
        if prediction_fn:
            end_points["Predictions"] = prediction_fn(logits, "Predictions")
    return logits, end_points


def training_scope(
    is_training: Optional[bool] = True,
    weight_decay: float = 0.00004,
    stddev: float = 0.09,
    dropout_keep_prob: float = 0.8,
    bn_decay: float = 0.997,
) -> dict:
    """The arg scope to train MobileNet v2/v3 in.

    ``with slim.arg_scope(training_scope()): mobilenet_v2.mobilenet(...)``.

    Args:
      is_training: mode of batch norm, dropout and the network functions; None
        leaves them to enclosing scopes.
      weight_decay: L2 decay of regular (not depthwise) convolution weights.
      stddev: truncated-normal initializer stddev; negative selects Xavier.
      dropout_keep_prob: dropout keep probability.
      bn_decay: batch-norm moving-average decay.

    Returns:
      The arg scope dict.
    """
    if stddev < 0:
        initializer = slim.initializers.xavier_initializer()
    else:
        initializer = tf.compat.v1.truncated_normal_initializer(stddev=stddev)
    weighted = [slim.conv2d, slim.fully_connected, slim.separable_conv2d]
    with slim.arg_scope(weighted, weights_initializer=initializer, normalizer_fn=slim.batch_norm), slim.arg_scope(
        [mobilenet_base, mobilenet], is_training=is_training
    ), safe_arg_scope([slim.batch_norm], is_training=is_training, decay=bn_decay), safe_arg_scope(
        [slim.dropout], is_training=is_training, keep_prob=dropout_keep_prob
    ), slim.arg_scope([slim.conv2d], weights_regularizer=slim.l2_regularizer(weight_decay)), slim.arg_scope(
        [slim.separable_conv2d], weights_regularizer=None
    ) as scope:
        return scope
