"""Convert a folder of class sub-folders of JPEG/PNG images into TF-Slim TFRecord shards.

Layout read: ``input_dir/<class name>/**/<image>.{jpg,jpeg,png}``; classes
are the sub-folders in sorted order (label 0 is the first). Every image is
decoded once; every other file (another image format, an empty file, one that
does not decode, a hidden one, one outside the class folders) is skipped and
listed with the reason, never fatal.
The split is stratified and seeded, so the same folder and seed always give
the same split.

Output (in ``output_dir``): ``<split>-NNNNN-of-MMMMM.tfrecord`` shards,
``labels.txt`` and ``dataset_info.json``. Everything is written into a
temporary sibling folder that is renamed to ``output_dir`` only at the end,
so a failed run leaves nothing the dataset factory would accept.
"""

import dataclasses
import math
import os
import shutil
import tempfile
from typing import Optional

import numpy as np
import tensorflow as tf

from slim_mp.config_fields import ArgumentError, argument
from slim_mp.datasets import image_folder_metadata as metadata
from slim_mp.datasets import labels_file, tfrecord_format
from slim_mp.json_files import current_umask

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png")
# Image formats a photo folder often holds besides those, by extension and by signature: TF-Slim's records hold
# JPEG or PNG only, so such files are among the skipped ones, called what they are.
OTHER_IMAGE_EXTENSIONS = {".bmp": "BMP", ".gif": "GIF", ".webp": "WebP", ".tif": "TIFF", ".tiff": "TIFF",
                          ".heic": "HEIC", ".heif": "HEIF"}
OTHER_IMAGE_SIGNATURES = ((b"BM", "BMP"), (b"GIF8", "GIF"), (b"II*\x00", "TIFF"), (b"MM\x00*", "TIFF"))
_HIDDEN_FOLDER = "hidden folder (left out with everything in it)"
_SAVE_AS_PNG = "save it as PNG to include it"
IMAGES_PER_SHARD = 1024


@dataclasses.dataclass(frozen=True)
class ImageEntry:
    """One decodable input image and what its TFRecord example needs besides the bytes."""

    path: str
    label: int
    image_format: str
    height: int
    width: int
    channels: int


@dataclasses.dataclass(frozen=True)
class ConversionSummary:
    """What a conversion produced: classes, images per split, and the files it skipped (with the reason)."""

    output_dir: str
    class_names: list[str]
    split_sizes: dict[str, int]
    skipped: list[tuple[str, str]]


class _ImageProbe:
    """Decodes encoded images with TensorFlow in a private graph, so it works in eager and graph mode alike."""

    def __init__(self) -> None:
        self._graph = tf.Graph()
        with self._graph.as_default():
            self._encoded = tf.compat.v1.placeholder(tf.string, ())
            self._shape = tf.shape(tf.io.decode_image(self._encoded, expand_animations=False))
        self._session = tf.compat.v1.Session(graph=self._graph)

    def shape(self, encoded: bytes) -> tuple[int, int, int]:
        """Return ``(height, width, channels)``; raise ``tf.errors.OpError`` if it does not decode."""
        height, width, channels = self._session.run(self._shape, {self._encoded: encoded})
        return int(height), int(width), int(channels)

    def close(self) -> None:
        """Release the session."""
        self._session.close()


def list_classes(input_dir: str) -> list[str]:
    """Return the class sub-folder names of ``input_dir``, sorted; ValueError unless there are at least two."""
    if not os.path.isdir(input_dir):
        raise ArgumentError(
            f"{argument('input_dir')}={input_dir} is not a folder; pass the folder that holds one sub-folder per class."
        )
    classes = sorted(
        name for name in os.listdir(input_dir)
        if not name.startswith(".") and os.path.isdir(os.path.join(input_dir, name))
    )
    if not classes:
        raise ArgumentError(
            f"{argument('input_dir')}={input_dir} has no class sub-folders; put each class's images in its own "
            "sub-folder."
        )
    if len(classes) == 1:
        raise ArgumentError(
            f"{argument('input_dir')}={input_dir} has a single class sub-folder ('{classes[0]}'); a classifier needs "
            "at least two."
        )
    return classes


def left_out_by_name(name: str) -> Optional[str]:
    """Why the file called ``name`` is not converted, judged by its name alone; None for a JPEG/PNG candidate."""
    if name.startswith("."):
        return "hidden file (names starting with '.' are left out)"
    extension = os.path.splitext(name)[1].lower()
    if extension in IMAGE_EXTENSIONS:
        return None
    if extension in OTHER_IMAGE_EXTENSIONS:
        return f"{OTHER_IMAGE_EXTENSIONS[extension]} image: only JPEG and PNG are converted; {_SAVE_AS_PNG}"
    return f"not a JPEG/PNG file name ({extension or 'no extension'})"


def list_images(class_dir: str) -> tuple[list[str], list[tuple[str, str]]]:
    """The JPEG/PNG candidates under ``class_dir`` (by name, any depth), sorted, and ``(path, reason)`` of every
    other file there; a hidden folder is one entry, left out with what it holds."""
    found, left_out = [], []
    for root, dirs, files in os.walk(class_dir):
        left_out.extend((os.path.join(root, name), _HIDDEN_FOLDER) for name in dirs if name.startswith("."))
        dirs[:] = [name for name in dirs if not name.startswith(".")]
        for name in files:
            reason = left_out_by_name(name)
            if reason is None:
                found.append(os.path.join(root, name))
            else:
                left_out.append((os.path.join(root, name), reason))
    return sorted(found), sorted(left_out)


def _outside_classes(input_dir: str, class_names: list[str]) -> list[tuple[str, str]]:
    """``(path, reason)`` of everything ``input_dir`` holds besides its class folders."""
    left_out = []
    for name in sorted(set(os.listdir(input_dir)) - set(class_names)):
        path = os.path.join(input_dir, name)
        left_out.append((path, _HIDDEN_FOLDER if os.path.isdir(path) else
                         "not in a class sub-folder; move it into the sub-folder of its class"))
    return left_out


def _content_problem(encoded: bytes) -> str:
    """Why ``encoded``, neither JPEG nor PNG by its signature, is not converted: what it is, when that is known."""
    if not encoded:
        return "empty file (0 bytes)"
    for signature, name in OTHER_IMAGE_SIGNATURES:
        if encoded.startswith(signature):
            return f"content is a {name} image, not JPEG or PNG; {_SAVE_AS_PNG}"
    return "content is neither JPEG nor PNG"


def _inspect(path: str, label: int, probe: _ImageProbe) -> ImageEntry:
    """Return the entry of a decodable image; ValueError saying why otherwise."""
    try:
        with open(path, "rb") as handle:
            encoded = handle.read()
    except OSError as error:
        raise ValueError(f"cannot be read ({error.strerror})") from error
    image_format = tfrecord_format.sniff_image_format(encoded)
    if image_format is None:
        raise ValueError(_content_problem(encoded))
    try:
        height, width, channels = probe.shape(encoded)
    except tf.errors.OpError as error:
        raise ValueError(f"{image_format.upper()} data does not decode") from error
    return ImageEntry(path, label, image_format, height, width, channels)


def scan_images(input_dir: str, class_names: list[str]) -> tuple[list[ImageEntry], list[tuple[str, str]]]:
    """Decode every candidate image once; return the usable entries and ``(path, reason)`` of skipped files."""
    entries, skipped = [], _outside_classes(input_dir, class_names)
    probe = _ImageProbe()
    try:
        for label, class_name in enumerate(class_names):
            class_dir = os.path.join(input_dir, class_name)
            class_entries = []
            candidates, left_out = list_images(class_dir)
            skipped.extend(left_out)
            for path in candidates:
                try:
                    class_entries.append(_inspect(path, label, probe))
                except ValueError as error:
                    skipped.append((path, str(error)))
            if not class_entries:
                raise ValueError(
                    f"class folder {class_dir} holds no readable JPEG/PNG image; add images or remove the folder."
                )
            entries.extend(class_entries)
    finally:
        probe.close()
    return entries, skipped


def stratified_split(
    entries: list[ImageEntry], validation_fraction: float, seed: int
) -> dict[str, list[ImageEntry]]:
    """Split each class into train/validation by ``validation_fraction`` (rounded, one train image kept at least).

    Both splits are shuffled with ``seed``, so shards mix classes. A split that
    gets no image is left out.
    """
    rng = np.random.default_rng(seed)
    splits: dict[str, list[ImageEntry]] = {"train": [], "validation": []}
    for label in sorted({entry.label for entry in entries}):
        members = [entry for entry in entries if entry.label == label]
        order = rng.permutation(len(members))
        num_validation = min(round(len(members) * validation_fraction), len(members) - 1)
        splits["validation"].extend(members[i] for i in order[:num_validation])
        splits["train"].extend(members[i] for i in order[num_validation:])
    for split_entries in splits.values():
        order = rng.permutation(len(split_entries))
        split_entries[:] = [split_entries[i] for i in order]
    return {name: split_entries for name, split_entries in splits.items() if split_entries}


def write_split(entries: list[ImageEntry], split_name: str, num_shards: int, directory: str) -> metadata.SplitInfo:
    """Write ``entries`` as ``num_shards`` TFRecord shards (at most one per image) into ``directory``."""
    num_shards = min(num_shards, len(entries))
    start = 0
    for shard_index, size in enumerate(metadata.shard_sizes(len(entries), num_shards)):
        path = os.path.join(directory, metadata.shard_filename(split_name, shard_index, num_shards))
        shard, start = entries[start:start + size], start + size
        with tf.io.TFRecordWriter(path) as writer:
            for entry in shard:
                with open(entry.path, "rb") as handle:
                    encoded = handle.read()
                writer.write(
                    tfrecord_format.encode_example(encoded, entry.image_format, entry.label, entry.height, entry.width)
                )
    return metadata.SplitInfo(len(entries), num_shards, metadata.shard_pattern(split_name, num_shards))


def _common_size(entries: list[ImageEntry]) -> Optional[list[int]]:
    """Return ``[height, width]`` if all entries share it, else None."""
    sizes = {(entry.height, entry.width) for entry in entries}
    return list(sizes.pop()) if len(sizes) == 1 else None


def _check_arguments(output_dir: str, validation_fraction: float, num_shards: Optional[int]) -> None:
    """Reject bad arguments before any work is done."""
    if not 0.0 <= validation_fraction < 1.0:
        raise ArgumentError(f"{argument('validation_fraction')}={validation_fraction} is outside [0, 1); pass e.g. "
                            "0.2.")
    if num_shards is not None and num_shards < 1:
        raise ArgumentError(f"{argument('num_shards')}={num_shards} must be at least 1; omit it to choose "
                            "automatically.")
    if os.path.exists(output_dir) and (not os.path.isdir(output_dir) or os.listdir(output_dir)):
        raise ArgumentError(f"{argument('output_dir')}={output_dir} exists and is not an empty folder; choose a new "
                            "folder.")


def _publish(staging_dir: str, output_dir: str) -> None:
    """Give the finished staging folder ordinary permissions and move it to ``output_dir`` in one rename."""
    os.chmod(staging_dir, 0o777 & ~current_umask())
    if os.path.isdir(output_dir):
        os.rmdir(output_dir)
    os.rename(staging_dir, output_dir)


def convert_image_folder(
    input_dir: str,
    output_dir: str,
    validation_fraction: float = 0.2,
    seed: int = 0,
    num_shards: Optional[int] = None,
) -> ConversionSummary:
    """Convert ``input_dir`` into a TF-Slim TFRecord data set in ``output_dir`` (which must be new or empty).

    ``num_shards`` caps the shards per split; by default each split gets one
    shard per ``IMAGES_PER_SHARD`` images.
    """
    output_dir = os.path.abspath(output_dir)
    _check_arguments(output_dir, validation_fraction, num_shards)
    class_names = list_classes(input_dir)
    entries, skipped = scan_images(input_dir, class_names)
    splits = stratified_split(entries, validation_fraction, seed)
    parent_dir = os.path.dirname(output_dir)
    os.makedirs(parent_dir, exist_ok=True)
    staging_dir = tempfile.mkdtemp(prefix=f".{os.path.basename(output_dir)}.partial-", dir=parent_dir)
    try:
        split_infos = {
            name: write_split(
                split_entries, name, num_shards or math.ceil(len(split_entries) / IMAGES_PER_SHARD), staging_dir
            )
            for name, split_entries in splits.items()
        }
        labels_file.write_labels(staging_dir, dict(enumerate(class_names)))
        info = metadata.FolderDatasetInfo(
            class_names=class_names,
            channels=1 if all(entry.channels == 1 for entry in entries) else 3,
            image_size=_common_size(entries),
            splits=split_infos,
            skipped_files=[os.path.relpath(path, input_dir) for path, _ in skipped],
            validation_fraction=validation_fraction,
            seed=seed,
        )
        metadata.write_info(info, staging_dir)
        _publish(staging_dir, output_dir)
    finally:
        shutil.rmtree(staging_dir, ignore_errors=True)
    split_sizes = {name: split_info.num_samples for name, split_info in split_infos.items()}
    return ConversionSummary(output_dir, class_names, split_sizes, skipped)
