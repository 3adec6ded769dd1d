"""Which kernel computes each gradient of a low-precision conv/matmul-class op (``GradientKernel``).

A low op's gradients need not run in its forward precision. On a CPU with AMX, a bfloat16
convolution is 3-4x faster than float32 forward and for its input gradient, yet its filter
gradient is barely faster (a 1x1 one is slower), and a depthwise convolution's gradients are 2-4x
slower in bfloat16. So each gradient of a low op (by input: a convolution's ``input`` and
``filter``, a product's ``a`` and ``b``) gets one of:

- ``LOW``: TensorFlow's own gradient in the op's precision (what ``placement='static'`` builds);
- ``FLOAT32``: TensorFlow's own gradient of a float32 twin of the op (the twin itself never runs:
  nothing reads its output), on the output gradient cast to float32 and the inputs in float32 (a
  weight's float32 read is free, an activation is cast); the result is cast back to the input's
  precision, except a weight's (an input that is a cast of float32 read by this op alone), which
  stays float32 and so skips the cast that the weight's gradient would otherwise need;
- ``MATMUL``: a 1x1 convolution's filter gradient (stride 1, no dilation, NHWC) as one low-precision
  matrix product: the input and the output gradient as [pixels, channels] matrices, ``inputᵀ·dy``.
  The same sums in the same precision as ``Conv2DBackpropFilter``; oneDNN's product kernels run it
  2-3x faster on AMX.

The measured placement times each kernel where the step runs and records the choice of a rewrite
as one value (``GradientKernels``: by op and role, as the decisions file pins it; by input index,
as ``rebuild`` applies it); ``rebuild`` gives each rebuilt op a gradient function that uses it
(``gradient_with_kernels``). Leaves alone: the forward op, gradients whose kernel is ``LOW``, op
types without a choice (``gradient_roles``).
"""

import collections
import dataclasses
import enum
from typing import Callable, Dict, FrozenSet, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import tensorflow as tf
from tensorflow.core.framework import attr_value_pb2
from tensorflow.python.framework import ops as framework_ops

# gradient(op, *output gradients) -> one gradient per input (None where there is none).
GradientFunction = Callable[..., Sequence[Optional[tf.Tensor]]]


class GradientKernel(enum.StrEnum):
    """How one gradient of a low op is computed; members are their own strings (``"matmul"``)."""

    LOW = "low"
    FLOAT32 = "float32"
    MATMUL = "matmul"


# Op types whose gradients may each take their own kernel: the role of each data input, in order.
GRADIENT_ROLES: Dict[str, Tuple[str, ...]] = {
    "Conv2D": ("input", "filter"),
    "DepthwiseConv2dNative": ("input", "filter"),
    "MatMul": ("a", "b"),
}
# Ops that read a tensor's shape only: no gradient flows back through them.
_SHAPE_READERS = frozenset({"Shape", "ShapeN", "Size", "Rank"})
# The input that holds the layer's weight in the networks (a cast of a float32 variable once rewritten).
WEIGHT_ROLES = frozenset({"filter", "b"})


def gradient_roles(op_type: str) -> Tuple[str, ...]:
    """The roles of ``op_type``'s data inputs whose gradient kernel can be chosen; () for other types."""
    return GRADIENT_ROLES.get(op_type, ())


def is_pointwise_conv(op_type: str, attrs: Mapping[str, object], filter_shape: Sequence[int]) -> bool:
    """Whether a convolution is 1x1 with stride 1, no dilation and NHWC data: its filter gradient is one
    matrix product (``MATMUL``)."""
    return (op_type == "Conv2D" and tuple(filter_shape[:2]) == (1, 1)
            and tuple(attrs.get("strides", ())) == (1, 1, 1, 1)
            and tuple(attrs.get("dilations", (1, 1, 1, 1))) == (1, 1, 1, 1)
            and attrs.get("data_format", "NHWC") in ("NHWC", b"NHWC")
            and attrs.get("padding") in ("SAME", "VALID", b"SAME", b"VALID"))


def kernels_for(op_type: str, role: str, attrs: Mapping[str, object],
                input_shapes: Sequence[Sequence[int]]) -> Tuple[GradientKernel, ...]:
    """The kernels the gradient of ``role`` can take: ``LOW`` and ``FLOAT32``, and ``MATMUL`` for a
    pointwise convolution's filter."""
    kernels = [GradientKernel.LOW, GradientKernel.FLOAT32]
    if role == "filter" and len(input_shapes) > 1 and is_pointwise_conv(op_type, attrs, input_shapes[1]):
        kernels.append(GradientKernel.MATMUL)
    return tuple(kernels)


def op_kernels(op: tf.Operation, role: str) -> Tuple[GradientKernel, ...]:
    """The kernels the gradient of ``op``'s input ``role`` can take (``kernels_for`` of its attributes and shapes)."""
    attrs = {name: op.get_attr(name) for name in ("strides", "dilations", "data_format", "padding")
             if name in op.node_def.attr}
    return kernels_for(op.type, role, attrs, [tensor.shape.as_list() for tensor in op.inputs])


def _float32_source(tensor: tf.Tensor) -> Tuple[tf.Tensor, bool]:
    """``tensor`` in float32, and whether that is free: the float32 input of its cast, else a new cast."""
    if tensor.op.type == "Cast" and tensor.op.inputs[0].dtype == tf.float32:
        return tensor.op.inputs[0], True
    return tf.cast(tensor, tf.float32), False


def _float32_twin(op: tf.Operation) -> tf.Operation:
    """A float32 copy of ``op`` on float32 inputs, made only to be differentiated (its output is never read).

    Every input of the ``GRADIENT_ROLES`` op types is data of the one type attribute ``T``.
    """
    inputs = [_float32_source(tensor)[0] for tensor in op.inputs]
    attrs = {name: value for name, value in op.node_def.attr.items() if not name.startswith("_")}
    attrs["T"] = attr_value_pb2.AttrValue(type=tf.float32.as_datatype_enum)
    return op.graph._create_op_internal(op.type, inputs, name=f"{op.name.split('/')[-1]}_float32_twin", attrs=attrs)


def _returns_float32(op: tf.Operation, index: int) -> bool:
    """Whether ``op``'s input ``index`` is a cast of float32 whose value only ``op`` reads (shape readers aside:
    they have no gradient): its gradient may stay float32, the cast's own gradient (a cast to float32) is then
    nothing, and no other gradient of another type is summed with it."""
    tensor = op.inputs[index]
    return (tensor.op.type == "Cast" and tensor.op.inputs[0].dtype == tf.float32
            and all(consumer is op or consumer.type in _SHAPE_READERS for consumer in tensor.consumers()))


def float32_gradients(op: tf.Operation, output_gradient: tf.Tensor) -> List[Optional[tf.Tensor]]:
    """TensorFlow's own gradients of ``op``'s float32 twin, in float32 (see ``GradientKernel.FLOAT32``)."""
    twin = _float32_twin(op)
    standard = framework_ops.get_gradient_function(twin)
    return list(standard(twin, tf.cast(output_gradient, tf.float32)))


def matmul_filter_gradient(op: tf.Operation, output_gradient: tf.Tensor) -> tf.Tensor:
    """A pointwise convolution's filter gradient as one low-precision product (see ``GradientKernel.MATMUL``)."""
    inputs, weights = op.inputs[0], op.inputs[1]
    channels_in, channels_out = weights.shape.as_list()[2:]
    pixels_by_input = tf.reshape(inputs, [-1, channels_in])
    pixels_by_output = tf.reshape(output_gradient, [-1, channels_out])
    product = tf.matmul(pixels_by_input, pixels_by_output, transpose_a=True)
    return tf.reshape(product, [1, 1, channels_in, channels_out])


def gradient_with_kernels(standard: GradientFunction, kernels: Mapping[int, GradientKernel]) -> GradientFunction:
    """``standard`` (the op's gradient function), with input ``i``'s gradient computed by ``kernels[i]``."""

    def gradient(op: tf.Operation, *output_gradients: tf.Tensor) -> List[Optional[tf.Tensor]]:
        results = list(standard(op, *output_gradients))
        float32 = None
        for index, kernel in sorted(kernels.items()):
            if kernel == GradientKernel.MATMUL:
                results[index] = matmul_filter_gradient(op, output_gradients[0])
            elif kernel == GradientKernel.FLOAT32:
                float32 = float32 if float32 is not None else float32_gradients(op, output_gradients[0])
                value = float32[index]
                results[index] = value if _returns_float32(op, index) else tf.cast(value, op.inputs[index].dtype)
        return results

    return gradient


# One op's chosen kernels: (role, kernel) pairs in input order, ``LOW`` ones left out.
_OpKernels = Tuple[Tuple[str, GradientKernel], ...]


def _kernel(name: Union[str, GradientKernel], op_name: str, role: str) -> GradientKernel:
    """``name`` as a ``GradientKernel``; ValueError naming the op, the role and the kernels there are."""
    try:
        return GradientKernel(name)
    except ValueError:
        kernels = ", ".join(kernel.value for kernel in GradientKernel)
        raise ValueError(f"{op_name}'s {role} gradient names the kernel {name!r}, which is none of {kernels}") from None


@dataclasses.dataclass(frozen=True)
class GradientKernels:
    """The gradient-kernel choice of one rewrite: per low op (by name), the kernel of each gradient that does
    not run in the op's precision, by role (``GRADIENT_ROLES``; ``LOW`` ones left out).

    The one value for the choice: the measured placement makes it (``kernel_choice``, by role), the plan
    carries it, the decisions file stores it (``as_json`` / ``by_role``), ``check`` tells whether a graph's
    ops can take it, and ``rebuild`` and the whole steps apply it by input index (``by_input``, the one
    place a role becomes an index). Hashable: built steps are kept by it.
    """

    ops: Tuple[Tuple[str, _OpKernels], ...] = ()

    @classmethod
    def by_role(cls, kernels: Mapping[str, Mapping[str, Union[str, GradientKernel]]]) -> "GradientKernels":
        """From op name -> role -> kernel (its name, as the decisions file holds it, or the member).

        Raises:
          ValueError: naming the op and role of a kernel that is none of ``GradientKernel``'s.
        """
        ops = {name: tuple((role, _kernel(kernel, name, role)) for role, kernel in roles.items())
               for name, roles in kernels.items()}
        return cls(tuple(sorted((name, tuple(pair for pair in pairs if pair[1] != GradientKernel.LOW))
                                for name, pairs in ops.items()
                                if any(kernel != GradientKernel.LOW for _, kernel in pairs))))

    def __bool__(self) -> bool:
        return bool(self.ops)

    def names(self) -> FrozenSet[str]:
        """The ops with a kernel other than ``LOW``."""
        return frozenset(name for name, _ in self.ops)

    def only(self, names: Iterable[str]) -> "GradientKernels":
        """The kernels of the ops ``names`` only."""
        kept = set(names)
        return GradientKernels(tuple(entry for entry in self.ops if entry[0] in kept))

    def by_input(self, op: tf.Operation) -> Dict[int, GradientKernel]:
        """``op``'s kernels by input index (none for an op without a chosen kernel)."""
        roles = gradient_roles(op.type)
        return {roles.index(role): kernel for role, kernel in dict(self.ops).get(op.name, ())}

    def as_json(self) -> Dict[str, Dict[str, str]]:
        """Op name -> role -> kernel name, as the plan's JSON and the decisions file hold it."""
        return {name: {role: kernel.value for role, kernel in pairs} for name, pairs in self.ops}

    def counts(self) -> Dict[str, int]:
        """How many gradients take each kernel, by kernel name."""
        return dict(collections.Counter(kernel.value for _, pairs in self.ops for _, kernel in pairs))

    def check(self, ops: Mapping[str, tf.Operation]) -> None:
        """Raise ValueError when an op it names is not among ``ops`` (by name), has no such gradient, or cannot
        take the kernel (a decisions file of another graph)."""
        for name, pairs in self.ops:
            op = ops.get(name)
            if op is None:
                raise ValueError(f"{name} is not in this graph")
            for role, kernel in pairs:
                if role not in gradient_roles(op.type):
                    raise ValueError(f"{name} ({op.type}) has no {role!r} gradient")
                if kernel not in op_kernels(op, role):
                    raise ValueError(f"{name} ({op.type}) cannot take the {kernel} kernel for its {role} gradient")
