"""The graphs the measured placement times: random variables (and, for a served graph's weights, random
constants) standing in for real inputs, and a fetch that forces every tensor to be computed.

Shared by the per-op micro-benchmarks (``micro_benchmark``) and the whole-step copies of candidate
placements (``candidate_step``), so both build their timing graphs the same way; the timing itself
is the project's one clock, ``slim_mp.timing``.
"""

from typing import List, Mapping, Sequence

import numpy as np
import tensorflow as tf

# The graph collection of the assign ops that initialise ``variable_of``'s variables.
_INITIALIZERS = "slim_mp_placement_initializers"
# The graph collection holding the one block of random normals that large variables repeat.
_RANDOM_BLOCK = "slim_mp_placement_random_block"
# Elements of that block: a prime, so its repeats line up with no tensor dimension.
RANDOM_BLOCK_SIZE = 4099
# The graph collections (one per rank) of the begin and size constants ``first_value`` shares.
_FIRST_VALUE_BOUNDS = "slim_mp_placement_first_value_bounds"


def _random_block() -> tf.Tensor:
    """The default graph's block of ``RANDOM_BLOCK_SIZE`` small random normals (made on first use)."""
    graph = tf.compat.v1.get_default_graph()
    existing = graph.get_collection(_RANDOM_BLOCK)
    if existing:
        return existing[0]
    normal = tf.raw_ops.RandomStandardNormal(shape=tf.constant([RANDOM_BLOCK_SIZE], tf.int32), dtype=tf.float32,
                                             seed=1, seed2=0)
    block = tf.raw_ops.Mul(x=normal, y=tf.constant(0.1, tf.float32))
    graph.add_to_collection(_RANDOM_BLOCK, block)
    return block


def random_variable(shape: Sequence[int], dtype: tf.DType) -> tf.Tensor:
    """The read of a variable of ``shape`` initialised in the graph (no large constants to copy around).

    Floating types get small random normals (N(0, 0.1²)): those of one block of the graph's
    (``RANDOM_BLOCK_SIZE``), repeated to fill the shape. Why repeated: drawing normals costs ~20 ns
    each and a timing graph's variables hold ~10⁸ elements, seconds per cold pass; repeating a block
    costs ~0.5 ns each, and a convolution's or product's time does not depend on its values.
    Integer and boolean types get zeros (valid labels and indices). Raw ops, as few as give that:
    this runs hundreds of times per timing graph.
    """
    dims = tf.constant(list(shape), tf.int32)
    if not dtype.is_floating:
        return variable_of(tf.raw_ops.Fill(dims=dims, value=tf.constant(0, dtype)))
    elements = int(np.prod(shape, dtype=np.int64))
    repeats = tf.constant([-(-elements // RANDOM_BLOCK_SIZE)], tf.int32)
    flat = tf.raw_ops.Slice(input=tf.raw_ops.Tile(input=_random_block(), multiples=repeats),
                            begin=tf.constant([0], tf.int32), size=tf.constant([elements], tf.int32))
    initial = tf.raw_ops.Reshape(tensor=flat, shape=dims)
    return variable_of(initial if dtype == tf.float32 else tf.raw_ops.Cast(x=initial, DstT=dtype))


def random_constant(shape: Sequence[int], dtype: tf.DType) -> tf.Tensor:
    """A constant of ``shape`` and floating ``dtype`` holding small normals (N(0, 0.1²)), one block of
    ``RANDOM_BLOCK_SIZE`` repeated as ``random_variable`` does: a weight as a frozen graph holds it."""
    block = np.random.default_rng(1).normal(0.0, 0.1, RANDOM_BLOCK_SIZE).astype(dtype.as_numpy_dtype)
    return tf.constant(np.resize(block, shape), dtype)


def variable_of(initial: tf.Tensor) -> tf.Tensor:
    """The read of a resource variable that ``variables_initializer()`` sets to ``initial``.

    Built from the raw ops (handle, assign, read), not ``tf.Variable``: a timing graph holds
    hundreds of them (a ResNet-50 step copy: ~480) and ``tf.Variable``'s Python machinery
    (collections, name scopes, checkpoint tracking) cost ~8 ms each, seconds per cold pass.
    The read is a bare ``ReadVariableOp``, a source the painter leaves alone.
    """
    graph = tf.compat.v1.get_default_graph()
    name = graph.unique_name("variable")
    handle = tf.raw_ops.VarHandleOp(dtype=initial.dtype, shape=initial.shape, shared_name=name)
    graph.add_to_collection(_INITIALIZERS, tf.raw_ops.AssignVariableOp(resource=handle, value=initial))
    return tf.raw_ops.ReadVariableOp(resource=handle, dtype=initial.dtype)


def variable_like(read: tf.Tensor) -> tf.Tensor:
    """The read of a new variable that starts where the ``variable_of`` variable read by ``read`` starts
    (the same initial tensor: no second random tensor as large as the first to generate)."""
    handle = read.op.inputs[0].op
    assign = next(op for op in read.graph.get_collection(_INITIALIZERS) if op.inputs[0].op is handle)
    return variable_of(assign.inputs[1])


def initializer_names(graph: tf.Graph) -> List[str]:
    """The names of the assign ops that initialise ``graph``'s ``variable_of`` variables."""
    return [op.name for op in graph.get_collection(_INITIALIZERS)]


def import_variables(graph_def, tensor_names: Sequence[str], initializers: Sequence[str],
                     scope: str) -> List[tf.Tensor]:
    """Import ``graph_def`` (a graph of ``variable_of`` variables, its assign ops named ``initializers``)
    into the default graph under ``scope``: the tensors named ``tensor_names`` there, the assigns
    registered for ``variables_initializer`` and ``load_variables``.

    Why: building hundreds of variables op by op costs seconds of Python per graph; a graph of them
    built once imports into each timing graph in milliseconds.
    """
    graph = tf.compat.v1.get_default_graph()
    elements = tf.graph_util.import_graph_def(graph_def, return_elements=list(tensor_names) + list(initializers),
                                              name=scope)
    for assign in elements[len(tensor_names):]:
        graph.add_to_collection(_INITIALIZERS, assign)
    return list(elements[:len(tensor_names)])


def variables_initializer() -> tf.Operation:
    """One op that sets every ``variable_of`` variable of the default graph to its initial value."""
    return tf.group(*tf.compat.v1.get_collection(_INITIALIZERS))


def load_variables(session: tf.compat.v1.Session, values: Mapping[tf.Tensor, object]) -> None:
    """Set the ``variable_of`` variables whose reads key ``values`` to those values (to reproduce a batch)."""
    by_handle = {read.op.inputs[0].op: value for read, value in values.items()}
    assigns = [op for op in session.graph.get_collection(_INITIALIZERS) if op.inputs[0].op in by_handle]
    session.run(assigns, {op.inputs[1]: by_handle[op.inputs[0].op] for op in assigns})


def first_value(tensor: tf.Tensor) -> tf.Tensor:
    """One element of ``tensor``, in its own type and rank: a fetch that needs it computed in full, one op (the
    slice's begin and size constants are shared per rank). Why one op: a micro-benchmark graph fetches every
    part of every signature alone, thousands of ops to build in Python per cold pass."""
    graph = tf.compat.v1.get_default_graph()
    key = f"{_FIRST_VALUE_BOUNDS}_{tensor.shape.rank}"
    bounds = graph.get_collection(key)
    if not bounds:
        rank = tensor.shape.rank
        bounds = [tf.constant([0] * rank, tf.int32), tf.constant([1] * rank, tf.int32)]
        for bound in bounds:
            graph.add_to_collection(key, bound)
    return tf.raw_ops.Slice(input=tensor, begin=bounds[0], size=bounds[1])


def first_values(tensors: Sequence[tf.Tensor]) -> tf.Tensor:
    """One element of each tensor, as float32: a fetch that needs every tensor computed in full.

    (Grappler prunes stateless ops that are only control dependencies of the fetched op.) Three raw
    ops per tensor, the constants shared: a step's fetch takes hundreds of tensors (every update).
    """
    flat, first, one = (tf.constant(value, tf.int32) for value in ([-1], [0], [1]))
    values = []
    for tensor in tensors:
        element = tf.raw_ops.Slice(input=tf.raw_ops.Reshape(tensor=tensor, shape=flat), begin=first, size=one)
        values.append(element if element.dtype == tf.float32 else tf.raw_ops.Cast(x=element, DstT=tf.float32))
    return tf.raw_ops.ConcatV2(values=values, axis=tf.constant(0, tf.int32)) if len(values) > 1 else values[0]
