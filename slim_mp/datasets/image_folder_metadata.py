"""The JSON file that describes a data set written by the image-folder converter.

The converter writes it last, so its presence marks a finished conversion;
``get_dataset('image_folder', ...)`` takes class names, split sizes and
shard file names from it.
"""

import dataclasses
import json
import os
from typing import Optional

METADATA_FILENAME = "dataset_info.json"
FORMAT_VERSION = 1


@dataclasses.dataclass(frozen=True)
class SplitInfo:
    """One split: how many images, in how many shards, matching which glob."""

    num_samples: int
    num_shards: int
    file_pattern: str


@dataclasses.dataclass(frozen=True)
class FolderDatasetInfo:
    """Everything a reader needs about a converted image folder.

    ``image_size`` is ``[height, width]`` when every image has that size, else
    None; ``skipped_files`` lists the input files that could not be decoded.
    """

    class_names: list[str]
    channels: int
    image_size: Optional[list[int]]
    splits: dict[str, SplitInfo]
    skipped_files: list[str]
    validation_fraction: float
    seed: int


def shard_filename(split_name: str, shard_index: int, num_shards: int) -> str:
    """Return the name of one shard, e.g. ``train-00001-of-00004.tfrecord``."""
    return f"{split_name}-{shard_index:05d}-of-{num_shards:05d}.tfrecord"


def shard_sizes(num_samples: int, num_shards: int) -> list[int]:
    """How many images each shard of a split holds: as equal as possible, the larger shards first."""
    base, extra = divmod(num_samples, num_shards)
    return [base + 1 if index < extra else base for index in range(num_shards)]


def shard_pattern(split_name: str, num_shards: int) -> str:
    """Return the glob that matches exactly the shards of one split."""
    return f"{split_name}-*-of-{num_shards:05d}.tfrecord"


def write_info(info: FolderDatasetInfo, directory: str) -> None:
    """Write the metadata file into ``directory`` (replacing it atomically)."""
    content = {"format_version": FORMAT_VERSION, **dataclasses.asdict(info)}
    path = os.path.join(directory, METADATA_FILENAME)
    with open(path + ".tmp", "w", encoding="utf-8") as handle:
        json.dump(content, handle, indent=2)
        handle.write("\n")
    os.replace(path + ".tmp", path)


def read_info(directory: str) -> FolderDatasetInfo:
    """Read the metadata file of ``directory``; ValueError when it is missing or not ours."""
    path = os.path.join(directory, METADATA_FILENAME)
    if not os.path.exists(path):
        raise ValueError(
            f"--dataset_dir={directory} has no {METADATA_FILENAME}, so it is not a finished image-folder "
            "conversion; run scripts/convert_image_folder.py into it or fix --dataset_dir."
        )
    try:
        with open(path, encoding="utf-8") as handle:
            content = json.load(handle)
        if content.pop("format_version") != FORMAT_VERSION:
            raise ValueError("unsupported format_version")
        content["splits"] = {name: SplitInfo(**split) for name, split in content["splits"].items()}
        return FolderDatasetInfo(**content)
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise ValueError(
            f"{path} is not a valid image-folder metadata file ({error}); run scripts/convert_image_folder.py again."
        ) from error
