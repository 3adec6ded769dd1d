"""Read IDX files (the MNIST / Fashion-MNIST container format) into numpy arrays.

An IDX file starts with two zero bytes, a type code, the number of
dimensions, then one big-endian uint32 per dimension and the raw values.
Only unsigned bytes (type 0x08) are needed for image data sets.
"""

import gzip
import os

import numpy as np

_UNSIGNED_BYTE = 0x08


def read_idx(path: str) -> np.ndarray:
    """Return the uint8 array stored in the IDX file ``path`` (gzip-compressed when it ends in ``.gz``)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as handle:
        content = handle.read()
    if len(content) < 4 or content[0] != 0 or content[1] != 0:
        raise ValueError(f"{path} is not an IDX file (bad magic number); pass an IDX image or label file.")
    type_code, num_dims = content[2], content[3]
    if type_code != _UNSIGNED_BYTE:
        raise ValueError(f"{path} holds IDX type 0x{type_code:02x}; only unsigned-byte (0x08) files are supported.")
    header_size = 4 + 4 * num_dims
    shape = tuple(int(size) for size in np.frombuffer(content[4:header_size], dtype=">u4"))
    values = np.frombuffer(content[header_size:], dtype=np.uint8)
    if values.size != int(np.prod(shape)):
        raise ValueError(
            f"{path} declares shape {shape} but holds {values.size} values; the file is truncated, download it again."
        )
    return values.reshape(shape)


def read_idx_pair(directory: str, prefix: str) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(images, labels)`` from ``<prefix>-images-idx3-ubyte[.gz]`` and ``<prefix>-labels-idx1-ubyte[.gz]``."""
    arrays = []
    for kind in ("images-idx3", "labels-idx1"):
        base = os.path.join(directory, f"{prefix}-{kind}-ubyte")
        path = base + ".gz" if os.path.exists(base + ".gz") else base
        if not os.path.exists(path):
            raise ValueError(f"{base}[.gz] does not exist; point the directory argument at the IDX files.")
        arrays.append(read_idx(path))
    images, labels = arrays
    if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
        raise ValueError(
            f"IDX files '{prefix}' in {directory} do not pair up: images {images.shape}, labels {labels.shape}."
        )
    return images, labels
