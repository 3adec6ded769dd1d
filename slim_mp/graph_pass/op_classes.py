"""Which TensorFlow op types run in low precision: the pass's tables, kept as plain data.

Four classes, as in grappler's auto mixed precision (step 2 of the pass, ``slim_mp.graph_pass`` numbers them):

* ``allow`` — always low precision: the ops tensor cores / AMX exist for.
* ``infer`` — low precision when fed by low-precision producers, unless tainted by a ``deny`` op upstream.
* ``clear`` — numerically neutral (movement, selection, relu, max-pool): follow their neighbours.
* ``deny``  — always float32 (range- or accuracy-sensitive); their float32 result taints downstream infer ops.

Op types in no class stay float32 and are listed in the report as "unlisted", so a newcomer can
classify them by editing the sets below. float16 and bfloat16 have separate tables: bfloat16 has
float32's exponent range, so reductions, logs and reciprocals are safe there but not in float16.
Every name here must be a registered TensorFlow op (a test checks it).
"""

import dataclasses
import difflib
from typing import Dict, FrozenSet, Iterable, Mapping

import tensorflow as tf
from tensorflow.python.framework import op_def_registry

CLASS_NAMES = ("allow", "infer", "clear", "deny")

_ALLOW_BOTH = {
    "BatchMatMul", "BatchMatMulV2", "Conv2D", "Conv2DBackpropFilter", "Conv2DBackpropInput", "Conv3D",
    "Conv3DBackpropFilterV2", "Conv3DBackpropInputV2", "DepthwiseConv2dNative",
    "DepthwiseConv2dNativeBackpropFilter", "DepthwiseConv2dNativeBackpropInput", "Einsum", "MatMul",
}
# Recurrent kernels are fast in float16 on GPUs only (cuDNN); oneDNN has no bfloat16 version of them.
_ALLOW_FP16_ONLY = {
    "BlockLSTM", "BlockLSTMV2", "CudnnRNN", "CudnnRNNV2", "CudnnRNNV3", "GRUBlockCell", "LSTMBlockCell",
}

_INFER_BOTH = {
    "Add", "AddN", "AddV2", "AvgPool", "AvgPool3D", "BiasAdd", "BiasAddV1", "Elu", "Erf", "Erfc", "FloorDiv",
    "FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3", "LeakyRelu", "Mul", "RealDiv", "Selu",
    "Sigmoid", "Softmax", "Softplus", "Softsign", "Sqrt", "Sub", "Tanh",
}
# Safe with bfloat16's 8-bit exponent, overflow- or underflow-prone with float16's 5-bit one.
_RANGE_SENSITIVE = {
    "Inv", "Log", "Log1p", "LogSoftmax", "Mean", "Prod", "Reciprocal", "Rsqrt", "Square",
    "SquaredDifference", "Sum",
}

_DENY_BOTH = {
    "Exp", "Expm1", "L2Loss", "Pow", "SoftmaxCrossEntropyWithLogits", "SparseSoftmaxCrossEntropyWithLogits",
}

_CLEAR_BOTH = {
    "Abs", "ArgMax", "ArgMin", "BatchToSpaceND", "BroadcastTo", "Ceil", "CheckNumerics", "ClipByValue",
    "Concat", "ConcatV2", "DepthToSpace", "EnsureShape", "Equal", "ExpandDims", "Fill", "Floor", "Gather",
    "GatherNd", "GatherV2", "Greater", "GreaterEqual", "Identity", "IdentityN", "IsFinite", "IsInf",
    "IsNan", "Less", "LessEqual", "Max", "MaxPool", "MaxPool3D", "MaxPoolV2", "Maximum", "Min", "Minimum",
    "MirrorPad", "Neg", "NotEqual", "OnesLike", "Pack", "Pad", "PadV2", "PreventGradient", "Relu", "Relu6",
    "Reshape", "ResizeNearestNeighbor", "ReverseV2", "Round", "Select", "SelectV2", "Shape", "ShapeN",
    "Sign", "Size", "Slice", "Snapshot", "SpaceToBatchND", "SpaceToDepth", "Split", "SplitV", "Squeeze",
    "StopGradient", "StridedSlice", "Tile", "TopKV2", "Transpose", "Unpack", "ZerosLike",
}


@dataclasses.dataclass(frozen=True)
class OpClasses:
    """The four op-type sets the painter reads; build variants with ``with_overrides``."""

    allow: FrozenSet[str]
    infer: FrozenSet[str]
    clear: FrozenSet[str]
    deny: FrozenSet[str]

    def class_of(self, op_type: str) -> str:
        """``allow``/``infer``/``clear``/``deny``, or ``unlisted``."""
        for name in CLASS_NAMES:
            if op_type in getattr(self, name):
                return name
        return "unlisted"

    def with_overrides(self, overrides: Mapping[str, Iterable[str]], remove: Iterable[str] = ()) -> "OpClasses":
        """Move the listed op types into the named classes; ``remove`` makes op types unlisted (float32).

        ``overrides`` maps a class name to op types, e.g. ``{"deny": ["Softmax"]}``; they are checked
        as ``check_class_overrides`` checks them.
        """
        removed = set(remove)
        requested = check_class_overrides(overrides, removed)
        moved = set(requested) | removed
        sets = {
            name: (set(getattr(self, name)) - moved) | {t for t, c in requested.items() if c == name}
            for name in CLASS_NAMES
        }
        return OpClasses(**{name: frozenset(values) for name, values in sets.items()})


def check_class_overrides(overrides: Mapping[str, Iterable[str]], remove: Iterable[str] = ()) -> Dict[str, str]:
    """Check requested class moves and removals; return each moved op type's new class.

    Raises:
      ValueError: for an unknown class name or TensorFlow op type, an op type named for two
        classes, or one both added and removed.
    """
    requested: Dict[str, str] = {}
    for class_name, op_types in overrides.items():
        if class_name not in CLASS_NAMES:
            raise ValueError(f"Unknown op class {class_name!r}; use one of {', '.join(CLASS_NAMES)}.")
        for op_type in op_types:
            check_op_type(op_type)
            if op_type in requested and requested[op_type] != class_name:
                raise ValueError(
                    f"Op type {op_type!r} is listed as both {requested[op_type]!r} and {class_name!r}; "
                    "keep it in one class."
                )
            requested[op_type] = class_name
    for op_type in set(remove):
        check_op_type(op_type)
        if op_type in requested:
            raise ValueError(f"Op type {op_type!r} is both added to {requested[op_type]!r} and removed.")
    return requested


def check_op_type(op_type: str) -> None:
    """Raise a ValueError naming close matches unless ``op_type`` is a registered TensorFlow op."""
    if op_def_registry.get(op_type) is not None:
        return
    known = list(_ALLOW_BOTH | _ALLOW_FP16_ONLY | _INFER_BOTH | _RANGE_SENSITIVE | _DENY_BOTH | _CLEAR_BOTH)
    close = difflib.get_close_matches(op_type, known, n=3)
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    raise ValueError(f"Unknown TensorFlow op type {op_type!r} in the mixed-precision op lists.{hint}")


FLOAT16_CLASSES = OpClasses(
    allow=frozenset(_ALLOW_BOTH | _ALLOW_FP16_ONLY),
    infer=frozenset(_INFER_BOTH),
    clear=frozenset(_CLEAR_BOTH | {"OneHot"}),
    deny=frozenset(_DENY_BOTH | _RANGE_SENSITIVE),
)

BFLOAT16_CLASSES = OpClasses(
    allow=frozenset(_ALLOW_BOTH),
    infer=frozenset(_INFER_BOTH | _RANGE_SENSITIVE),
    clear=frozenset(_CLEAR_BOTH),
    deny=frozenset(_DENY_BOTH),
)


def default_classes(precision: tf.DType) -> OpClasses:
    """The default table for ``tf.float16`` or ``tf.bfloat16``."""
    return FLOAT16_CLASSES if precision == tf.float16 else BFLOAT16_CLASSES


# The other op-type knowledge of the pass and of the tools around it, kept here with the classes so
# that one test checks every name against TensorFlow's op registry.

# Ops the painter never colours: values come from outside the computation, casts go around them.
SOURCE_OP_TYPES = frozenset({
    "Const", "Placeholder", "PlaceholderWithDefault", "ReadVariableOp", "ResourceGather", "VariableV2",
    "Variable", "VarHandleOp", "IteratorGetNext", "IteratorGetNextSync", "OptionalGetValue",
})

# Ops that run a function body the pass does not enter (TF2 control flow, function calls).
FUNCTION_OP_TYPES = frozenset({
    "While", "StatelessWhile", "If", "StatelessIf", "Case", "StatelessCase", "PartitionedCall",
    "StatefulPartitionedCall",
})

# Stateful ops that only draw random numbers: a standalone copy of the computation keeps them (dropout).
RANDOM_OP_TYPES = frozenset({
    "RandomUniform", "RandomUniformInt", "RandomStandardNormal", "TruncatedNormal", "RandomShuffle",
})

# Ops that create a variable (as opposed to reading or updating one): placed on the variables' device.
VARIABLE_OP_TYPES = frozenset({"VarHandleOp", "VariableV2", "Variable"})

# Consumers grappler's remapper fuses into the op producing their first input, by consumer: the producer
# types (a convolution or product with its bias add, that bias add or batch norm with its activation).
# A cast between them, or a control edge out of the producer, would cost the fused kernel TensorFlow runs in
# float32 and, with oneDNN, in bfloat16: border refinement keeps such a consumer with its producer
# (``refine``), and a weight cast that waits for a layer waits for the end of its fusion (``weight_casts``).
FUSED_INTO_PRODUCER = {
    "BiasAdd": frozenset({"Conv2D", "Conv3D", "DepthwiseConv2dNative", "MatMul", "BatchMatMulV2"}),
    "Relu": frozenset({"BiasAdd", "FusedBatchNormV3"}),
    "Relu6": frozenset({"BiasAdd"}),
    "Elu": frozenset({"BiasAdd"}),
    "LeakyRelu": frozenset({"BiasAdd"}),
}


def fuses_into(consumer: tf.Operation) -> bool:
    """Whether grappler fuses ``consumer`` into the op producing its first input (``FUSED_INTO_PRODUCER``)."""
    return bool(consumer.inputs) and consumer.inputs[0].op.type in FUSED_INTO_PRODUCER.get(consumer.type, ())


# Op types the rebuild replaces by a newer op that has a low-precision data type.
UPGRADED_OP_TYPES = {"FusedBatchNorm": "FusedBatchNormV3"}

# Float attrs that stay float32 even when the op runs in low precision (batch norm's scale, offset, statistics).
KEEP_FLOAT32_ATTRS = {
    "FusedBatchNormV2": frozenset({"U"}),
    "FusedBatchNormV3": frozenset({"U"}),
    "_FusedBatchNormEx": frozenset({"U"}),
}
