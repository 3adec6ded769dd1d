"""The JSON file that describes a data set written by the image-folder converter.

The converter writes it last, so its presence marks a finished conversion;
``get_dataset('image_folder', ...)`` takes class names, split sizes and
shard file names from it.
"""

import dataclasses
import os
from typing import Optional

from slim_mp.config_fields import ArgumentError, argument
from slim_mp.json_files import JsonFileError, ListOf, MappingOf, read_json_file, write_json_atomically

METADATA_FILENAME = "dataset_info.json"
FORMAT_VERSION = 1
# The shape of the file, as ``slim_mp.json_files.read_json_file`` checks it.
_SCHEMA = {
    "format_version": int,
    "class_names": ListOf(str),
    "channels": int,
    "image_size": (list, type(None)),  # [height, width] or null; the items are checked by read_info
    "splits": MappingOf({"num_samples": int, "num_shards": int, "file_pattern": str}),
    "skipped_files": ListOf(str),
    "validation_fraction": (int, float),
    "seed": int,
}


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
    write_json_atomically(os.path.join(directory, METADATA_FILENAME),
                          {"format_version": FORMAT_VERSION, **dataclasses.asdict(info)})


def read_info(directory: str) -> FolderDatasetInfo:
    """Read the metadata file of ``directory``; ValueError naming the file when it is missing, damaged or not ours."""
    path = os.path.join(directory, METADATA_FILENAME)
    rerun = "run scripts/convert_image_folder.py again"
    try:
        content = read_json_file(path, _SCHEMA)
    except FileNotFoundError:
        raise ArgumentError(
            f"{argument('dataset_dir')}={directory} has no {METADATA_FILENAME}, so it is not a finished image-folder "
            f"conversion; run scripts/convert_image_folder.py into it or fix {argument('dataset_dir')}."
        ) from None
    except JsonFileError as error:
        raise ValueError(f"{path} is not a valid image-folder metadata file ({error.problem}); {rerun}.") from None
    size = content["image_size"]
    if size is not None and (len(size) != 2 or not all(isinstance(n, int) and not isinstance(n, bool) for n in size)):
        raise ValueError(f"{path} is not a valid image-folder metadata file (field 'image_size' should be null or "
                         f"[height, width], found {size}); {rerun}.")
    if content["format_version"] != FORMAT_VERSION:
        raise ValueError(
            f"{path} is not a valid image-folder metadata file (format_version {content['format_version']}, "
            f"this reader knows {FORMAT_VERSION}); {rerun}."
        )
    splits = {name: SplitInfo(split["num_samples"], split["num_shards"], split["file_pattern"])
              for name, split in content["splits"].items()}
    names = [field.name for field in dataclasses.fields(FolderDatasetInfo) if field.name != "splits"]
    return FolderDatasetInfo(splits=splits, **{name: content[name] for name in names})
