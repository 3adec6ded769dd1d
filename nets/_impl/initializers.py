"""Initializers shared by several official-path network modules."""

import tensorflow as tf


def trunc_normal(stddev: float) -> tf.compat.v1.truncated_normal_initializer:
    """Zero-mean truncated normal initializer with ``stddev`` (the official modules' ``trunc_normal``)."""
    return tf.compat.v1.truncated_normal_initializer(0.0, stddev)
