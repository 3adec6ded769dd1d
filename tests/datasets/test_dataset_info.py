"""``dataset_info.json`` of the wrong shape or types: one error naming the file and the field, never a traceback."""

import json

import pytest

from slim_mp.datasets import get_dataset
from slim_mp.datasets import image_folder_metadata as metadata

GOOD = {
    "format_version": metadata.FORMAT_VERSION, "class_names": ["a", "b"], "channels": 3, "image_size": [28, 28],
    "splits": {"train": {"num_samples": 5, "num_shards": 1, "file_pattern": "train-*-of-00001.tfrecord"}},
    "skipped_files": [], "validation_fraction": 0.0, "seed": 0,
}


def test_the_written_file_reads_back(tmp_path):
    info = metadata.FolderDatasetInfo(
        class_names=["a", "b"], channels=3, image_size=None,
        splits={"train": metadata.SplitInfo(5, 1, "train-*-of-00001.tfrecord")},
        skipped_files=["bad.png"], validation_fraction=0.25, seed=3,
    )
    metadata.write_info(info, str(tmp_path))
    assert metadata.read_info(str(tmp_path)) == info


@pytest.mark.parametrize("content, field", [
    ([GOOD], "the file should be a JSON object, found a list"),
    (dict(GOOD, class_names="ab"), "field 'class_names' should be a list, found a string"),
    (dict(GOOD, splits={"train": {"num_samples": "5", "num_shards": 1, "file_pattern": "x"}}),
     "field 'splits'['train']['num_samples'] should be an integer, found a string"),
    (dict(GOOD, channels=True), "field 'channels' should be an integer, found a boolean"),
    (dict(GOOD, image_size=[28]), "field 'image_size' should be null or [height, width], found [28]"),
    ({key: value for key, value in GOOD.items() if key != "seed"}, "the file lacks the field 'seed'"),
    (dict(GOOD, format_version=7), "format_version 7, this reader knows 1"),
])
def test_a_damaged_file_is_named_with_its_field(tmp_path, content, field):
    path = tmp_path / metadata.METADATA_FILENAME
    path.write_text(json.dumps(content))
    with pytest.raises(ValueError) as raised:
        get_dataset("image_folder", "train", str(tmp_path))
    assert str(raised.value) == (
        f"{path} is not a valid image-folder metadata file ({field}); run scripts/convert_image_folder.py again."
    )
