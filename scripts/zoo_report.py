"""Build every network of the zoo under the graph pass and tabulate what the pass did.

    python scripts/zoo_report.py --precision bfloat16 --output zoo_bfloat16.md

Per network: parameters, default image size, ops converted to low precision, casts the pass
inserted in the forward graph, casts in the whole train step (forward and backward), and any
conv/matmul left in float32 (should be none).
"""

import quiet_tensorflow_start  # noqa: F401  (first: TensorFlow loads without its start-up notices on screen)

import time

import numpy as np
import tensorflow as tf
from absl import flags

import slim_mp
from nets import nets_factory
from slim_mp.graph_pass import select_region
from slim_mp.markdown_table import markdown_header, markdown_row
from slim_mp.training import cli

flags.DEFINE_string("precision", "bfloat16", "float16 or bfloat16.")
flags.DEFINE_list("names", [], "Networks to build (default: all).")
flags.DEFINE_string("output", None, "Also write the markdown table here.")
FLAGS = flags.FLAGS

_MATH = {"Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter", "DepthwiseConv2dNative",
         "DepthwiseConv2dNativeBackpropInput", "DepthwiseConv2dNativeBackpropFilter", "MatMul",
         "BatchMatMulV2", "Conv3D", "Conv3DBackpropInputV2", "Conv3DBackpropFilterV2"}


def network_row(name: str, precision: str) -> dict:
    """Build ``name`` at its default size with a train step; return the table row."""
    started = time.perf_counter()
    graph = tf.Graph()
    with graph.as_default():
        network_fn = nets_factory.get_network_fn(name, num_classes=1001, is_training=True)
        size = network_fn.default_image_size
        shape = [1, 16, size, size, 3] if name in ("i3d", "s3dg") else [1, size, size, 3]
        logits, _ = network_fn(tf.compat.v1.placeholder(tf.float32, shape))
        tf.compat.v1.losses.sparse_softmax_cross_entropy(tf.zeros([1], tf.int64), tf.reshape(logits, [1, -1]))
        optimizer = slim_mp.enable_mixed_precision(tf.compat.v1.train.GradientDescentOptimizer(0.1), precision)
        with tf.control_dependencies(tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.UPDATE_OPS)):
            train_op = optimizer.minimize(tf.compat.v1.losses.get_total_loss())
        report = optimizer.rewrite_reports[0]
        step_ops = select_region(train_op).ops
        params = sum(int(np.prod(v.shape.as_list())) for v in tf.compat.v1.model_variables())
    return {
        "network": name, "params": params, "image_size": size, "ops_converted": report.ops_converted,
        "casts_forward": len(report.casts), "casts_train_step": sum(op.type == "Cast" for op in step_ops),
        "float32_math": sum(op.type in _MATH and op.outputs[0].dtype == tf.float32 for op in step_ops),
        "float32_reasons": sorted({r.split(" (")[0] for r in report.float32_ops
                                   if "deny" not in r and r != "unlisted op type"}),
        "unlisted": sorted(report.unlisted_op_types),
        "seconds": time.perf_counter() - started,
    }


def main() -> None:
    """Build each network, print its table row as it is done, and write the table to --output if given."""
    names = FLAGS.names or nets_factory.network_names()
    header = ("network", "params", "image size", "ops converted", "casts (forward)", "casts (train step)",
              "float32 conv/matmul", "unlisted op types", "other float32 islands")
    lines = [f"Precision: {FLAGS.precision}", "", *markdown_header(header, "lrrrrrrll")]
    print("\n".join(lines), flush=True)
    for name in names:
        row = network_row(name, FLAGS.precision)
        line = markdown_row((row["network"], f"{row['params']:,}", row["image_size"], row["ops_converted"],
                             row["casts_forward"], row["casts_train_step"], row["float32_math"],
                             ", ".join(row["unlisted"]) or "-", "; ".join(row["float32_reasons"]) or "-"))
        lines.append(line)
        print(line, flush=True)
    if FLAGS.output:
        with open(FLAGS.output, "w", encoding="utf-8") as handle:
            handle.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    cli.run(main)
