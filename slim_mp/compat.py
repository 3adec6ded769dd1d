"""Make tf_slim 1.1.0 import and run under TensorFlow 2.21.

tf_slim 1.1.0 was written against TensorFlow 1.x/2.0-era internals. Since then
TensorFlow split several of its internal modules (``array_ops``,
``control_flow_ops``, ``variable_scope``, ``variables``, ``ops``) and dropped
the old names, while tf_slim still reaches them through the old modules
(``from tensorflow.python.ops import array_ops`` then ``array_ops.stack``).
``install()`` puts each missing name back, bound to the same object TensorFlow
exports publicly today; every fix is a no-op where the running TensorFlow still
has the name. It also replaces ``assign_from_checkpoint``, whose partitioned
path fails under NumPy 2. Importing ``slim_mp`` or ``nets`` calls ``install()``.

One fix is a speed-up, not a repair, and it is process-wide: ``tf.Variable.__hash__`` and
``__eq__`` are replaced by ones that answer a plain graph's question (identity) without first
asking TensorFlow for the outer context (``_fast_graph_mode_identity``: the same answers,
without the quadratic cost legacy layers pay; eager code and ``tf.function`` get TensorFlow's own
methods). ``$SLIM_MP_FAST_VARIABLE_HASH=0`` in the environment before the import leaves
``tf.Variable`` as TensorFlow defines it (docs/compatibility.md says what that costs).

The table ``MOVED_SYMBOLS`` was found by a scan of tf_slim's installed sources
for ``module.attribute`` uses through TensorFlow-internal modules;
``tests/compat/test_tf_slim_symbols.py`` repeats the scan and fails if any
referenced name is missing after ``install()``.
"""

import dataclasses
import importlib
import os
import pkgutil
import sys
from typing import Dict, List, Mapping, Sequence, Tuple, Union

import numpy as np
import tensorflow as tf
from tensorflow.python.eager import context as _eager_context
from tensorflow.python.ops import variables as _variables

FAST_VARIABLE_HASH_ENV = "SLIM_MP_FAST_VARIABLE_HASH"
_LEGACY_LAYERS = "tf_keras.legacy_tf_layers"
_LEGACY_LAYERS_SOURCE = "tf_keras.src.legacy_tf_layers"


@dataclasses.dataclass(frozen=True)
class MovedSymbol:
    """A name tf_slim reads from ``old_module`` that TF 2.21 keeps only in ``new_module``."""

    old_module: str
    name: str
    new_module: str
    new_name: str
    breaks: str  # what fails without it


_OPS = "tensorflow.python.ops"
MOVED_SYMBOLS: Tuple[MovedSymbol, ...] = (
    MovedSymbol("tensorflow.python.framework.ops", "IndexedSlices",
                "tensorflow.python.framework.indexed_slices", "IndexedSlices",
                "create_train_op(clip_gradient_norm=...), gradient_multipliers and summarize_gradients"),
    MovedSymbol("tensorflow.python.framework.ops", "Tensor", "tensorflow.python.framework.tensor", "Tensor",
                "multiply_gradients and slim.utils.constant_value"),
    MovedSymbol(f"{_OPS}.array_ops", "stack", f"{_OPS}.array_ops_stack", "stack",
                "tfexample_decoder.Tensor with shape_keys and SparseTensor, the thresholded streaming "
                "metrics (streaming_auc, *_at_thresholds), streaming_concat, slim.legacy_fully_connected"),
    MovedSymbol(f"{_OPS}.array_ops", "unstack", f"{_OPS}.array_ops_stack", "unstack",
                "slim.legacy_fully_connected on inputs of rank > 2"),
    MovedSymbol(f"{_OPS}.control_flow_ops", "cond", f"{_OPS}.cond", "cond",
                "tfexample_decoder.Image (JPEG check) and BackupHandler, slim.batch_norm/dropout with a "
                "tensor is_training (layers.utils.smart_cond), streaming_dynamic_auc, streaming_concat, "
                "precision_at_recall"),
    MovedSymbol(f"{_OPS}.control_flow_ops", "case", f"{_OPS}.control_flow_case", "case",
                "tfexample_decoder.Image (decoder chosen by image/format), so every image read by "
                "DatasetDataProvider"),
    MovedSymbol(f"{_OPS}.control_flow_ops", "Assert", f"{_OPS}.control_flow_assert", "Assert",
                "slim.metrics.auc_using_histogram (histogram_ops)"),
    MovedSymbol(f"{_OPS}.control_flow_ops", "while_loop", f"{_OPS}.while_loop", "while_loop",
                "slim.losses.metric_learning.cluster_loss"),
    MovedSymbol(f"{_OPS}.variable_scope", "variable", f"{_OPS}.variable_v1", "VariableV1",
                "slim.local_variable and slim.global_variable, so the streaming metrics' counters"),
    MovedSymbol(f"{_OPS}.variables", "VariableV1", f"{_OPS}.variable_v1", "VariableV1",
                "tf_slim's own metric tests (shipped in its wheel) build their inputs with it"),
    MovedSymbol(f"{_OPS}.variable_scope", "enable_resource_variables",
                f"{_OPS}.resource_variables_toggle", "enable_resource_variables",
                "tf_slim's own optimizer, variable and metric tests switch variable kinds with it"),
    MovedSymbol(f"{_OPS}.variable_scope", "disable_resource_variables",
                f"{_OPS}.resource_variables_toggle", "disable_resource_variables",
                "tf_slim's own optimizer and variable tests"),
    MovedSymbol(f"{_OPS}.variable_scope", "resource_variables_enabled",
                f"{_OPS}.resource_variables_toggle", "resource_variables_enabled",
                "tf_slim's own variable tests"),
)


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


def _restore_moved_symbols() -> None:
    """Bind every name of ``MOVED_SYMBOLS`` in its old module, unless the module still has it."""
    for symbol in MOVED_SYMBOLS:
        old_module = importlib.import_module(symbol.old_module)
        if not hasattr(old_module, symbol.name):
            new_home = importlib.import_module(symbol.new_module)
            setattr(old_module, symbol.name, getattr(new_home, symbol.new_name))


VarList = Union[Sequence[tf.Variable], Mapping[str, Union[tf.Variable, Sequence[tf.Variable]]]]


def _group_by_checkpoint_name(var_list: VarList) -> Dict[str, List[tf.Variable]]:
    """Map each checkpoint name to its variables; the parts of a partitioned variable share one name."""
    from tf_slim.ops import variables as slim_variables

    if isinstance(var_list, Mapping):
        return {name: list(value) if isinstance(value, (list, tuple)) else [value]
                for name, value in var_list.items()}
    grouped: Dict[str, List[tf.Variable]] = {}
    for variable in var_list:
        grouped.setdefault(slim_variables.get_variable_full_name(variable), []).append(variable)
    return grouped


def _checkpoint_part(checkpoint_name: str, value: np.ndarray, variable: tf.Variable) -> np.ndarray:
    """The part of the checkpoint ``value`` that ``variable`` holds (all of it unless partitioned)."""
    slice_info = variable._save_slice_info  # pylint: disable=protected-access
    if slice_info:
        part = tuple(slice(start, start + size) for start, size in zip(slice_info.var_offset, slice_info.var_shape))
        return value[part].reshape(slice_info.var_shape)
    if variable.get_shape() != value.shape:
        raise ValueError(
            f"Total size of new array must be unchanged for {checkpoint_name} "
            f"lh_shape: [{value.shape}], rh_shape: [{variable.get_shape()}]")
    return value


def assign_from_checkpoint(model_path: str, var_list: VarList,
                           ignore_missing_vars: bool = False) -> Tuple[tf.Operation, dict]:
    """``slim.assign_from_checkpoint`` that also restores partitioned variables under NumPy 2.

    tf_slim 1.1.0 cuts a partition out of the checkpoint value with a *list*
    of slices, which NumPy 2 rejects (``IndexError: only integers, slices
    ...``); this indexes with a tuple. Arguments, results and errors are
    tf_slim's.

    Args:
      model_path: checkpoint path (e.g. from ``tf.train.latest_checkpoint``).
      var_list: variables (partitioned ones by their parts), or a dict from
        checkpoint names to a variable or a list of variables.
      ignore_missing_vars: warn about, instead of failing on, names missing
        from the checkpoint.

    Returns:
      ``(assign_op, feed_dict)``: run the op with the feed dict to restore.

    Raises:
      ValueError: a name is missing from the checkpoint (unless
        ``ignore_missing_vars``), or a non-partitioned variable's shape
        differs from the checkpoint's.
    """
    reader = tf.compat.v1.train.NewCheckpointReader(model_path)
    feed_dict = {}
    assign_ops = []
    for checkpoint_name, variables in _group_by_checkpoint_name(var_list).items():
        if not reader.has_tensor(checkpoint_name):
            message = f"Checkpoint is missing variable [{checkpoint_name}]"
            if not ignore_missing_vars:
                raise ValueError(message)
            tf.compat.v1.logging.warning(message)
            continue
        value = reader.get_tensor(checkpoint_name)
        for variable in variables:
            placeholder = tf.compat.v1.placeholder(
                variable.dtype.base_dtype, variable.get_shape(), name="placeholder/" + variable.op.name)
            assign_ops.append(variable.assign(placeholder))
            feed_dict[placeholder] = _checkpoint_part(checkpoint_name, value, variable)
    return tf.group(*assign_ops), feed_dict


def _replace_assign_from_checkpoint() -> None:
    """Install ``assign_from_checkpoint`` where users reach tf_slim's: ``slim.`` and ``slim.ops.variables.``."""
    import tf_slim
    from tf_slim.ops import variables as slim_variables

    for module in (tf_slim, slim_variables):
        module.assign_from_checkpoint = assign_from_checkpoint


def _building_plain_graph() -> bool:
    """True when ops go into a graph that is not a function's: then variables compare by identity.

    The cheap equivalent of ``not executing_eagerly_outside_functions()`` for this case: not eager,
    and the default graph is not building a function, so the outermost context is that graph.
    """
    return not _eager_context.executing_eagerly() and not tf.compat.v1.get_default_graph().building_function


def _fast_graph_mode_identity() -> None:
    """Hash and compare ``tf.Variable`` by identity in a plain graph without probing the outer context.

    Why: tf.compat.v1 legacy layers (``slim.batch_norm`` goes through them) build
    ``set(global_variables())`` for every weight they add, so a network with n variables hashes
    about n²/2 of them; TensorFlow's ``Variable.__hash__``/``__eq__`` first call
    ``executing_eagerly_outside_functions()``, tens of microseconds each, which made up about 40%
    of a NASNet graph's build time. In a plain graph TensorFlow's own answer is already
    ``id(self)`` / ``self is other``; elsewhere (eager, inside a ``tf.function``) the original
    methods run unchanged.
    """
    variable_class = _variables.Variable
    if getattr(variable_class.__hash__, "slim_mp_fast_path", False):
        return
    original_hash, original_eq = variable_class.__hash__, variable_class.__eq__

    def identity_hash(self):
        return id(self) if _building_plain_graph() else original_hash(self)

    def identity_eq(self, other):
        return self is other if _building_plain_graph() else original_eq(self, other)

    identity_hash.slim_mp_fast_path = True
    variable_class.__hash__, variable_class.__eq__ = identity_hash, identity_eq


def switched_on(variable: str, off_keeps: str) -> bool:
    """Whether environment ``variable``, a process-wide change's opt-out, leaves the change on: unset or 1 (the
    default) does, 0 keeps ``off_keeps`` instead.

    Raises:
      ValueError: naming the variable when it holds anything else.
    """
    value = os.environ.get(variable) or "1"
    if value not in ("0", "1"):
        raise ValueError(f"${variable}={value!r} is neither 0 nor 1; set it to 0 to keep {off_keeps}, or unset it.")
    return value == "1"


def install() -> None:
    """Apply every compatibility fix (the ``tf.Variable`` speed-up unless opted out); safe to call more than once."""
    _alias_legacy_tf_layers()
    _restore_moved_symbols()
    _replace_assign_from_checkpoint()
    if switched_on(FAST_VARIABLE_HASH_ENV, "TensorFlow's own tf.Variable hash and equality"):
        _fast_graph_mode_identity()
