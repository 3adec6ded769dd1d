"""Make tf_slim 1.1.0 import and run under TensorFlow 2.21.

tf_slim 1.1.0 was written against TensorFlow 1.x/2.0-era internals. Three of
them moved, and each breaks a common slim code path. ``install()`` patches
them once; every fix is a no-op where the running TensorFlow does not need it.
Importing ``slim_mp`` or ``nets`` calls ``install()``.
"""

import importlib
import pkgutil
import sys

import tensorflow as tf
from tensorflow.python.framework import ops as _tf_ops

_LEGACY_LAYERS = "tf_keras.legacy_tf_layers"
_LEGACY_LAYERS_SOURCE = "tf_keras.src.legacy_tf_layers"


def _alias_legacy_tf_layers() -> None:
    """Expose ``tf_keras.legacy_tf_layers``, which ``tf.compat.v1.layers`` imports.

    Since TF 2.16, ``tensorflow/python/layers/*.py`` lazily import
    ``tf_keras.legacy_tf_layers.<name>``; tf-keras 2.21 keeps those modules
    under ``tf_keras.src.legacy_tf_layers`` only. ``slim.batch_norm`` (and so
    every batch-norm network) goes through them, so without the alias it fails
    with ``No module named 'tf_keras.legacy_tf_layers'``.
    """
    try:
        importlib.import_module(_LEGACY_LAYERS)
        return
    except ImportError:
        pass
    try:
        package = importlib.import_module(_LEGACY_LAYERS_SOURCE)
    except ImportError as error:
        raise ImportError(
            "slim_mp needs tf-keras 2.21 for tf_slim's batch_norm; install it with "
            "`pip install --no-deps tf-keras==2.21.0` (or `make install`)."
        ) from error
    sys.modules[_LEGACY_LAYERS] = package
    for module in pkgutil.iter_modules(package.__path__):
        full_name = f"{_LEGACY_LAYERS_SOURCE}.{module.name}"
        sys.modules[f"{_LEGACY_LAYERS}.{module.name}"] = importlib.import_module(full_name)


def _restore_ops_aliases() -> None:
    """Restore ``ops.IndexedSlices`` and ``ops.Tensor``, removed from TF 2.21's ops module.

    tf_slim uses ``ops.IndexedSlices`` in ``clip_gradient_norms``,
    ``multiply_gradients`` and ``add_gradients_summaries`` (so
    ``create_train_op(clip_gradient_norm=...)``, ``gradient_multipliers`` and
    ``summarize_gradients`` fail with AttributeError), and ``ops.Tensor`` in
    ``multiply_gradients`` and ``slim.utils.constant_value``.
    """
    if not hasattr(_tf_ops, "IndexedSlices"):
        _tf_ops.IndexedSlices = tf.IndexedSlices
    if not hasattr(_tf_ops, "Tensor"):
        _tf_ops.Tensor = tf.Tensor


def install() -> None:
    """Apply every compatibility fix; safe to call more than once."""
    _alias_legacy_tf_layers()
    _restore_ops_aliases()
