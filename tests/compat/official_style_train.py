"""A user's training script in the style of the official TF-Slim ``train_image_classifier.py``, plus its eval.

What a user has: tf_slim's reader (``slim.dataset.Dataset`` + ``DatasetDataProvider`` +
``tf.train.batch``) over official-format TFRecords, the official script's train tensor (the total loss after
the updates, so nothing checks the loss itself) and ``slim.learning.train``, then
``slim.evaluation.evaluate_once`` with streaming metrics. What they add for mixed precision: ``import
slim_mp``, one ``enable_mixed_precision`` line after the optimizer is built, and
``train_step_fn=slim_mp.train_step`` in the ``slim.learning.train`` call (the lines of docs/compatibility.md).
``tf.disable_eager_execution()`` is what any TF1-style script needs under TF 2.21; INFO logging is what the
official script sets. The summaries are the official script's: a histogram and the sparsity of every
activation, each loss, a histogram of every model variable, the learning rate and the total loss.
``--loop=monitored`` trains in a ``MonitoredTrainingSession`` instead, with ``slim_mp.TrainStepHook``
and ``slim_mp.reporting_divergence()`` (the lines of docs/compatibility.md for such a loop);
``--nan_pixel_from_step=N`` puts one NaN pixel in every image read once the global step reaches N
(data gone bad mid-run).

``--mode=train`` prints one JSON line with the low-precision Conv2D count and the rewrite summary,
``--mode=eval`` one with the streaming accuracy, ``--mode=train_and_eval`` both (one TensorFlow
start-up instead of two). The network is a small LeNet-like
convnet so the test stays fast; ``get_split`` is the official ``datasets/mnist.py`` recipe.
"""

import json
import os

import tensorflow.compat.v1 as tf
import tf_slim as slim

import slim_mp

NUM_CLASSES = 10
IMAGE_SHAPE = (28, 28, 1)

FLAGS = tf.app.flags.FLAGS


def get_split(file_pattern: str, num_samples: int, shape=IMAGE_SHAPE, num_classes: int = NUM_CLASSES):
    """The official ``datasets/mnist.py`` dataset over ``file_pattern`` (keys of download_and_convert_mnist)."""
    keys_to_features = {
        "image/encoded": tf.FixedLenFeature((), tf.string, default_value=""),
        "image/format": tf.FixedLenFeature((), tf.string, default_value="raw"),
        "image/class/label": tf.FixedLenFeature([1], tf.int64, default_value=tf.zeros([1], dtype=tf.int64)),
    }
    items_to_handlers = {
        "image": slim.tfexample_decoder.Image(shape=list(shape), channels=shape[-1]),
        "label": slim.tfexample_decoder.Tensor("image/class/label", shape=[]),
    }
    decoder = slim.tfexample_decoder.TFExampleDecoder(keys_to_features, items_to_handlers)
    return slim.dataset.Dataset(
        data_sources=file_pattern, reader=tf.TFRecordReader, decoder=decoder, num_samples=num_samples,
        items_to_descriptions={"image": "a grayscale image", "label": "its class"}, num_classes=num_classes)


def small_lenet(images, is_training: bool, end_points_collection: str = "small_lenet_end_points"):
    """LeNet's layout (conv, pool, conv, pool, fc, dropout, fc) at a quarter of its width: (logits, end points)."""
    with slim.arg_scope([slim.conv2d, slim.fully_connected], activation_fn=tf.nn.relu,
                        weights_initializer=tf.truncated_normal_initializer(stddev=0.1)), \
            slim.arg_scope([slim.conv2d, slim.fully_connected, slim.max_pool2d],
                           outputs_collections=end_points_collection):
        net = slim.conv2d(images, 8, [5, 5], scope="conv1")
        net = slim.max_pool2d(net, [2, 2], 2, scope="pool1")
        net = slim.conv2d(net, 16, [5, 5], scope="conv2")
        net = slim.max_pool2d(net, [2, 2], 2, scope="pool2")
        net = slim.fully_connected(slim.flatten(net), 64, scope="fc3")
        net = slim.dropout(net, 0.9, is_training=is_training, scope="dropout3")
        logits = slim.fully_connected(net, NUM_CLASSES, activation_fn=None, scope="fc4")
        return logits, slim.utils.convert_collection_to_dict(end_points_collection)


def _batch(split_name: str, num_samples: int, shuffle: bool):
    dataset = get_split(os.path.join(FLAGS.dataset_dir, f"mnist_{split_name}.tfrecord"), num_samples)
    provider = slim.dataset_data_provider.DatasetDataProvider(
        dataset, num_readers=1, shuffle=shuffle, common_queue_capacity=4 * FLAGS.batch_size,
        common_queue_min=2 * FLAGS.batch_size, seed=FLAGS.seed)
    image, label = provider.get(["image", "label"])
    image = (tf.to_float(image) - 128.0) / 128.0  # the official lenet_preprocessing scaling
    if FLAGS.nan_pixel_from_step >= 0:
        poisoned = tf.tensor_scatter_nd_update(image, [[0, 0, 0]], [float("nan")])
        image = tf.cond(tf.train.get_global_step() >= FLAGS.nan_pixel_from_step, lambda: poisoned, lambda: image)
    return tf.train.batch([image, label], batch_size=FLAGS.batch_size, num_threads=1,
                          capacity=5 * FLAGS.batch_size)


def _official_summaries(end_points: dict, learning_rate: float, total_loss) -> tf.Tensor:
    """The summaries the official train_image_classifier.py writes, merged."""
    summaries = set(tf.get_collection(tf.GraphKeys.SUMMARIES))
    for name, activation in end_points.items():
        summaries.add(tf.summary.histogram("activations/" + name, activation))
        summaries.add(tf.summary.scalar("sparsity/" + name, tf.nn.zero_fraction(activation)))
    for loss in tf.get_collection(tf.GraphKeys.LOSSES):
        summaries.add(tf.summary.scalar("losses/" + loss.op.name, loss))
    for variable in slim.get_model_variables():
        summaries.add(tf.summary.histogram(variable.op.name, variable))
    summaries.add(tf.summary.scalar("learning_rate", tf.constant(learning_rate)))
    summaries.add(tf.summary.scalar("total_loss", total_loss))
    return tf.summary.merge(list(summaries), name="summary_op")


def _monitored_training(train_op, summary_op) -> float:
    """The loop of docs/compatibility.md for a MonitoredTrainingSession: the hook, and divergence as one sentence."""
    hooks = [slim_mp.TrainStepHook(loss=train_op, log_every_n_steps=FLAGS.log_every_n_steps),
             tf.train.StopAtStepHook(last_step=FLAGS.max_number_of_steps)]
    loss = float("nan")
    with tf.train.MonitoredTrainingSession(
            checkpoint_dir=FLAGS.train_dir, hooks=hooks, scaffold=tf.train.Scaffold(summary_op=summary_op),
            save_summaries_secs=FLAGS.save_summaries_secs, save_checkpoint_secs=FLAGS.save_interval_secs) as sess, \
            slim_mp.reporting_divergence():
        while not sess.should_stop():
            loss = sess.run(train_op)
    return loss


def train() -> dict:
    with tf.Graph().as_default():
        if FLAGS.seed is not None:
            tf.set_random_seed(FLAGS.seed)
        global_step = slim.create_global_step()
        images, labels = _batch("train", FLAGS.num_samples, shuffle=True)
        logits, end_points = small_lenet(images, is_training=True)
        slim.losses.softmax_cross_entropy(logits, slim.one_hot_encoding(labels, NUM_CLASSES))
        total_loss = slim.losses.get_total_loss()
        summary_op = _official_summaries(end_points, FLAGS.learning_rate, total_loss)
        optimizer = tf.train.MomentumOptimizer(FLAGS.learning_rate, 0.9)
        if FLAGS.precision != "float32":
            optimizer = slim_mp.enable_mixed_precision(optimizer, precision=FLAGS.precision,
                                                       debug_nonfinite=FLAGS.debug_nonfinite)
        # The official script's train tensor: the loss after the updates (no check of the loss itself).
        update_op = tf.group(*tf.get_collection(tf.GraphKeys.UPDATE_OPS),
                             optimizer.minimize(total_loss, global_step=global_step))
        with tf.control_dependencies([update_op]):
            train_op = tf.identity(total_loss, name="train_op")
        low_precision_convs = [op.name for op in tf.get_default_graph().get_operations()
                               if op.type == "Conv2D" and op.get_attr("T") != tf.float32]
        if FLAGS.loop == "monitored":
            final_loss = _monitored_training(train_op, summary_op)
        else:
            final_loss = slim.learning.train(
                train_op, FLAGS.train_dir, number_of_steps=FLAGS.max_number_of_steps,
                log_every_n_steps=FLAGS.log_every_n_steps, summary_op=summary_op,
                save_summaries_secs=FLAGS.save_summaries_secs, save_interval_secs=FLAGS.save_interval_secs,
                train_step_fn=slim_mp.train_step)
        reports = getattr(optimizer, "rewrite_reports", [])
        return {"final_loss": float(final_loss), "low_precision_convs": len(low_precision_convs),
                "rewrite": reports[0].summary() if reports else None}


def evaluate() -> dict:
    with tf.Graph().as_default():
        slim.get_or_create_global_step()
        images, labels = _batch("test", FLAGS.eval_num_samples, shuffle=False)
        predictions = tf.argmax(small_lenet(images, is_training=False)[0], 1)
        values, updates = slim.metrics.aggregate_metric_map({
            "accuracy": slim.metrics.streaming_accuracy(predictions, labels)})
        checkpoint = tf.train.latest_checkpoint(FLAGS.train_dir)
        results = slim.evaluation.evaluate_once(
            "", checkpoint, os.path.join(FLAGS.train_dir, "eval"), num_evals=FLAGS.eval_num_samples // FLAGS.batch_size,
            eval_op=list(updates.values()), final_op=values)
        return {"checkpoint": checkpoint, "accuracy": float(results["accuracy"])}


def define_flags() -> None:
    """The script's flags; defined only when run as a script, so importing ``get_split`` defines none."""
    tf.app.flags.DEFINE_string("mode", "train", "train, eval or train_and_eval (one process, as the test runs it)")
    tf.app.flags.DEFINE_string("dataset_dir", None, "folder of mnist_<split>.tfrecord")
    tf.app.flags.DEFINE_string("train_dir", None, "checkpoints")
    tf.app.flags.DEFINE_integer("num_samples", None, "records in the train split")
    tf.app.flags.DEFINE_integer("eval_num_samples", None, "records in the test split (a multiple of batch_size)")
    tf.app.flags.DEFINE_integer("batch_size", 32, "batch size")
    tf.app.flags.DEFINE_integer("max_number_of_steps", 50, "training steps")
    tf.app.flags.DEFINE_float("learning_rate", 0.05, "momentum optimizer learning rate")
    tf.app.flags.DEFINE_string("precision", "bfloat16", "float32 (no slim_mp line), bfloat16 or float16")
    tf.app.flags.DEFINE_boolean("debug_nonfinite", False, "name the op of a skipped step's first inf/NaN")
    tf.app.flags.DEFINE_integer("log_every_n_steps", 10, "steps between progress lines")
    tf.app.flags.DEFINE_integer("seed", None, "initial weights, dropout and shuffling (unseeded by default)")
    tf.app.flags.DEFINE_integer("save_summaries_secs", 600, "seconds between summaries (the official default)")
    tf.app.flags.DEFINE_integer("save_interval_secs", 600, "seconds between checkpoints (the official default)")
    tf.app.flags.DEFINE_string("loop", "slim", "slim (slim.learning.train) or monitored (MonitoredTrainingSession)")
    tf.app.flags.DEFINE_integer("nan_pixel_from_step", -1, "from this global step on, one NaN pixel per image")


def main(_) -> None:
    results = {}
    if FLAGS.mode in ("train", "train_and_eval"):
        results.update(train())
    if FLAGS.mode in ("eval", "train_and_eval"):
        results.update(evaluate())
    print(json.dumps(results))


if __name__ == "__main__":
    define_flags()
    tf.disable_eager_execution()
    tf.logging.set_verbosity(tf.logging.INFO)
    tf.app.run()
