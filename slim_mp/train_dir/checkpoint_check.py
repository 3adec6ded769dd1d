"""Whether one checkpoint's files read back whole: the check our resume and evaluation and the user seams share.

Leaves alone: which checkpoints a folder holds and which one to use (``checkpoint_folder``'s survey, for our
scripts and a user's loop alike).
"""

import os
from typing import Optional

import tensorflow as tf
from absl import logging

# What TensorFlow's checkpoint reader raises for damaged files (its C++ status becomes one of these).
READ_FAILURES = (tf.errors.OpError, ValueError, IndexError, RuntimeError, OSError)


def checkpoint_damage(train_dir: str, prefix: str) -> Optional[str]:
    """Say what is wrong with checkpoint ``prefix`` of ``train_dir`` (naming the file), or None if it is intact.

    Opens the index and reads every tensor (their checksums are verified), so it costs one read
    of the checkpoint.
    """
    path = os.path.join(train_dir, prefix)
    if not os.path.exists(path + ".index"):
        return f"{prefix}.index is missing"
    try:
        reader = tf.train.load_checkpoint(path)
    except READ_FAILURES as error:
        logging.info("Reading %s.index failed: %s", prefix, error)
        return f"{prefix}.index is damaged"
    data_files = sorted(name for name in os.listdir(train_dir) if name.startswith(prefix + ".data-"))
    try:
        for name in reader.get_variable_to_shape_map():
            reader.get_tensor(name)
    except READ_FAILURES as error:
        named = data_files[0] if len(data_files) == 1 else f"{prefix}.data-*"
        logging.info("Reading %s failed: %s", named, error)
        return f"{named} is damaged or truncated"
    return None
