"""Small pieces shared by MobileNet v1 and the conv-def builder of v2/v3: padding, depth rounding, scopes.

They are not official module contents; ``nets/mobilenet_v1.py`` and the
``nets/mobilenet`` package import them from here.
"""

import contextlib
import functools
from typing import Callable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import tensorflow as tf
import tf_slim as slim

# A conv def's ``defaults``/``overrides`` entry: a function (or tuple of functions) -> its default arguments.
ArgScopeDefaults = Union[Mapping[tuple, dict], Sequence[Tuple[tuple, dict]]]

# Depth rounding never goes more than 10% below the scaled value (the official rule).
ROUNDING_TOLERANCE = 0.9


def fixed_padding(inputs: tf.Tensor, kernel_size: Sequence[int], rate: int = 1) -> tf.Tensor:
    """Zero-pad height and width so that a VALID convolution gives the SAME-padded output size.

    The padding depends only on the (dilated) kernel, never on the input size, so a
    network padded this way gives the same result for odd and even input sizes.
    """
    pads = []
    for size in kernel_size[:2]:
        total = (size - 1) * rate
        pads.append([total // 2, total - total // 2])
    return tf.pad(inputs, [[0, 0], pads[0], pads[1], [0, 0]])


def average_pool(inputs: tf.Tensor, pool_op=tf.nn.avg_pool2d, window: Optional[Sequence[int]] = None,
                   stride: int = 1, mean_name: str = "global_average") -> tf.Tensor:
    """Average-pool ``inputs`` with ``window`` (default: its whole height and width) and ``stride``, VALID padding.

    When height or width is unknown at graph-build time a whole-map average is a
    ``tf.reduce_mean`` named ``mean_name`` instead (TensorFlow 2.21's pooling ops need a static window).
    """
    height, width = inputs.shape.as_list()[1:3]
    if window is None:
        window = (height, width)
    if None in window:
        return tf.reduce_mean(inputs, [1, 2], keepdims=True, name=mean_name)
    return pool_op(inputs, ksize=[1, window[0], window[1], 1], strides=[1, stride, stride, 1], padding="VALID")


def make_divisible(value: float, divisor: int = 8, min_value: Optional[int] = None) -> int:
    """Round ``value`` to the nearest multiple of ``divisor`` (at least ``min_value``), losing at most 10%.

    This is the official MobileNet rounding of layer depths, so scaled networks get
    exactly the official channel counts.
    """
    floor = divisor if min_value is None else min_value
    rounded = max(floor, int(value + divisor / 2) // divisor * divisor)
    if rounded < ROUNDING_TOLERANCE * value:
        rounded += divisor
    return int(rounded)


def split_divisible(total: int, ways: int, divisible_by: int = 8) -> List[int]:
    """Split ``total`` channels into ``ways`` parts, each a multiple of ``divisible_by``, as evenly as possible.

    Raises:
      ValueError: ``total`` is not a multiple of ``divisible_by`` or a part would be smaller than it.
    """
    if total % divisible_by or total / ways < divisible_by:
        raise ValueError(
            f"cannot split {total} channels {ways} ways into multiples of {divisible_by}; "
            "use fewer ways or a depth that is a multiple of the divisor."
        )
    parts: List[int] = []
    for index in range(ways):
        target = total * (index + 1) / ways
        part = total // ways // divisible_by * divisible_by
        while sum(parts) + part < target:
            part += divisible_by
        parts.append(part)
    return parts


@contextlib.contextmanager
def arg_scope_defaults(defaults: ArgScopeDefaults) -> Iterator[None]:
    """Enter one ``slim.arg_scope`` per ``(functions, arguments)`` entry of ``defaults``, in order.

    ``defaults`` is a conv def's ``defaults`` or ``overrides`` (a mapping or a list of
    pairs); later entries win over earlier ones for the same function and argument.
    """
    entries = list(defaults.items()) if hasattr(defaults, "items") else list(defaults)
    with contextlib.ExitStack() as stack:
        for functions, arguments in entries:
            stack.enter_context(slim.arg_scope(functions, **arguments))
        yield


@contextlib.contextmanager
def variable_and_name_scope(
    scope: Union[None, str, tf.compat.v1.VariableScope], default_name: Optional[str]
) -> Iterator[tf.compat.v1.VariableScope]:
    """Open ``scope`` as a variable scope and put the ops in its own name scope too.

    Re-entering a scope object (the one the classifier opened) thus adds no
    ``_1``-suffixed name scope: ops and variables share the same prefix.
    """
    with tf.compat.v1.variable_scope(scope, default_name=default_name) as variable_scope:
        with tf.compat.v1.name_scope(variable_scope.original_name_scope):
            yield variable_scope


def wrapped_partial(func: Callable, *args, **kwargs) -> Callable:
    """``functools.partial`` that keeps ``func``'s name, docstring and attributes (e.g. ``default_image_size``)."""
    partial_func = functools.partial(func, *args, **kwargs)
    functools.update_wrapper(partial_func, func)
    return partial_func


def reject_generic_multiplier(kwargs: dict, network: str) -> None:
    """Refuse ``multiplier=`` in a network function's ``kwargs``: its own argument is ``depth_multiplier``.

    Raises:
      ValueError: ``multiplier`` is in ``kwargs``.
    """
    if "multiplier" in kwargs:
        raise ValueError(f"{network} doesn't support generic multiplier parameter use \"depth_multiplier\" instead.")
