"""The op a user built, from the name of the kernel TensorFlow executed for it.

What runs is not always what the graph says. Grappler fuses a convolution with its bias and
activation into ``_FusedConv2D``; with oneDNN on (TensorFlow's default on x86 CPUs with
AVX512-VNNI, AVX512-BF16 or AMX, or ``TF_ENABLE_ONEDNN_OPTS=1``) the layout pass then renames
kernels to ``_MklNativeConv2DBackpropFilter``, ``_MklMatMul``, ``_MklNativeFusedBatchNormEx``, ...
Anything that reads executed graphs (step stats, partition graphs) goes through ``op_family`` so
that it speaks of ``Conv2DBackpropFilter``, ``MatMul``, ``FusedBatchNormV3`` on every CPU.
"""

from typing import Dict, Optional

# oneDNN's prefixes, longest first: ``_MklNative<Op>`` (plain tensor layout) and ``_Mkl<Op>``.
ONEDNN_PREFIXES = ("_MklNative", "_Mkl")

# Kernels whose name is not that of a graph op, by the op they do the work of: grappler's fusions
# and oneDNN's own (a Pad folded into the convolution, a bias folded into it or its gradient).
FUSED_KERNEL_FAMILIES: Dict[str, str] = {
    "_FusedConv2D": "Conv2D",
    "_FusedConv3D": "Conv3D",
    "_FusedDepthwiseConv2dNative": "DepthwiseConv2dNative",
    "_FusedMatMul": "MatMul",
    "_FusedBatchMatMulV2": "BatchMatMulV2",
    "_FusedBatchNormEx": "FusedBatchNormV3",
    "_FusedBatchNormGradEx": "FusedBatchNormGradV3",
    "_PadWithConv2D": "Conv2D",
    "_PadWithFusedConv2D": "Conv2D",
    "_Conv2DWithBias": "Conv2D",
    "_Conv2DBackpropFilterWithBias": "Conv2DBackpropFilter",
}


def op_family(kernel: str) -> str:
    """The graph op type a kernel's work belongs to (``_MklNativeFusedConv2D`` -> ``Conv2D``).

    Args:
        kernel: the executed node's op, as a partition graph or step stats name it.

    Returns:
        The op type of ``FUSED_KERNEL_FAMILIES`` or the name without oneDNN's prefix; any other
        name (``Conv2D``, ``Cast``, ``_Retval``) unchanged. oneDNN's fusions of element-wise
        subgraphs (``_MklSwish``, ``_MklLayerNorm``, ...) have no graph op and lose only the prefix.
    """
    for prefix in ONEDNN_PREFIXES:
        if kernel.startswith(prefix):
            base = kernel[len(prefix):]
            return FUSED_KERNEL_FAMILIES.get(f"_{base}", base)
    return FUSED_KERNEL_FAMILIES.get(kernel, kernel)


def fusion_name(kernel: str) -> Optional[str]:
    """The fusion a kernel runs, named as grappler names it (``_MklNativeFusedConv2D`` -> ``_FusedConv2D``).

    None for a kernel that does one graph op's work (``Conv2D``, ``_MklNativeConv2D``, ``Cast``). The
    names are those of ``FUSED_KERNEL_FAMILIES``, so the float32 and bfloat16 steps of one network
    compare fusion by fusion whether oneDNN renamed their kernels or not.
    """
    for prefix in ONEDNN_PREFIXES:
        if kernel.startswith(prefix):
            kernel = f"_{kernel[len(prefix):]}"
            break
    return kernel if kernel in FUSED_KERNEL_FAMILIES else None
