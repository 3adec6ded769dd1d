"""Copy a checkpoint with some tensors multiplied by factors (e.g. to make a layer overflow float16).

A factor is a number, or an array broadcast against its tensor (elementwise factors, e.g. to
perturb weights by one part in a million).

Every tensor of the source is written; the named ones are multiplied first. The copy appears
whole or not at all: it is written into a temporary folder beside the destination, which is then
renamed.
"""

import os
import shutil
import tempfile
from typing import Mapping, Union

import numpy as np
import tensorflow as tf

from slim_mp.train_dir.checkpoint_folder import resolve_checkpoint

tf1 = tf.compat.v1

SCALED_CHECKPOINT_NAME = "model.ckpt"

Factor = Union[float, np.ndarray]


def _scaled_tensors(checkpoint: str, factors: Mapping[str, Factor]) -> dict:
    """All tensors of ``checkpoint`` by name, those of ``factors`` multiplied (in their own dtype)."""
    reader = tf.train.load_checkpoint(checkpoint)
    stored = reader.get_variable_to_shape_map()
    missing = sorted(set(factors) - set(stored))
    if missing:
        raise ValueError(f"checkpoint {checkpoint} has no tensor {', '.join(missing)}; "
                         "name tensors it holds (tf.train.list_variables lists them).")
    tensors = {name: reader.get_tensor(name) for name in stored}
    for name, factor in factors.items():
        with np.errstate(over="ignore"):  # reported below, naming the tensor
            tensors[name] = (tensors[name] * factor).astype(tensors[name].dtype)
        if not np.all(np.isfinite(tensors[name])):
            raise ValueError(f"scaling {name} by {np.max(np.abs(factor)):g} overflows its {tensors[name].dtype}; "
                             "use a smaller factor.")
    return tensors


def _save(tensors: Mapping[str, np.ndarray], prefix: str) -> None:
    """Save ``tensors`` as the checkpoint ``prefix`` (values fed, not embedded in the graph)."""
    graph = tf.Graph()
    with graph.as_default():
        feeds, variables = {}, {}
        for name, value in tensors.items():
            placeholder = tf1.placeholder(tf.as_dtype(value.dtype), value.shape)
            variables[name] = tf1.Variable(placeholder, name=name.replace("/", "_"), trainable=False)
            feeds[placeholder] = value
        saver = tf1.train.Saver(variables, save_relative_paths=True)
        with tf1.Session(graph=graph) as session:
            session.run(tf1.global_variables_initializer(), feed_dict=feeds)
            saver.save(session, prefix, write_meta_graph=False)


def write_scaled_checkpoint(source: str, destination_dir: str, factors: Mapping[str, Factor]) -> str:
    """Write ``destination_dir/model.ckpt``: the checkpoint ``source`` with ``factors[name]`` times each named tensor.

    Args:
      source: a checkpoint prefix, or a folder whose latest checkpoint is read.
      destination_dir: the folder to create; it must not exist yet.
      factors: tensor name -> multiplier, a number or an array broadcast against the tensor.

    Returns:
      The prefix of the written checkpoint.

    Raises:
      ValueError: ``destination_dir`` exists, a named tensor is missing, or scaling overflows it.
    """
    checkpoint = resolve_checkpoint(source, "source")
    if os.path.exists(destination_dir):
        raise ValueError(f"{destination_dir} already exists; remove it or name another folder for the scaled copy.")
    tensors = _scaled_tensors(checkpoint, factors)
    parent = os.path.dirname(os.path.abspath(destination_dir))
    os.makedirs(parent, exist_ok=True)
    temporary = tempfile.mkdtemp(prefix=".scaled-", dir=parent)
    try:
        _save(tensors, os.path.join(temporary, SCALED_CHECKPOINT_NAME))
        os.rename(temporary, destination_dir)
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    return os.path.join(destination_dir, SCALED_CHECKPOINT_NAME)
