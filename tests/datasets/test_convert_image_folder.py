"""Tests of the image-folder converter: the real CLI as a subprocess, then the library for seeding and failures."""

import json
import os
import subprocess

import numpy as np
import pytest

from argument_errors import raises_naming
from datasets_support import encode_images, read_all
from script_runs import REPO_ROOT, check_bad_input, run_script
from slim_mp.datasets import convert_image_folder, get_dataset
from slim_mp.json_files import current_umask

SCRIPT = os.path.join(REPO_ROOT, "scripts", "convert_image_folder.py")
CLASSES = ["apple", "banana", "cherry"]
PNG_PER_CLASS, JPEG_PER_CLASS = 6, 4
IMAGES_PER_CLASS = PNG_PER_CLASS + JPEG_PER_CLASS
SIZE = 8


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return run_script(SCRIPT, *args)


def make_folder(root: str, classes: list[str]) -> dict[bytes, int]:
    """Write PNG (one of them grayscale) and JPEG images per class; return ``{RGB pixel bytes: label}`` of the PNGs."""
    rng = np.random.default_rng(0)
    png_pixels = {}
    for label, class_name in enumerate(classes):
        class_dir = os.path.join(root, class_name, "nested" if label == 0 else "")
        os.makedirs(class_dir, exist_ok=True)
        images = list(rng.integers(0, 256, (IMAGES_PER_CLASS, SIZE, SIZE, 3), dtype=np.uint8))
        images[0] = images[0][..., :1]
        pngs = encode_images(images[:PNG_PER_CLASS], "png")
        jpegs = encode_images(images[PNG_PER_CLASS:], "jpeg")
        for index, data in enumerate(pngs):
            open(os.path.join(class_dir, f"img{index}.PNG" if index == 1 else f"img{index}.png"), "wb").write(data)
            png_pixels[np.broadcast_to(images[index], (SIZE, SIZE, 3)).tobytes()] = label
        for index, data in enumerate(jpegs):
            open(os.path.join(class_dir, f"photo{index}.jpeg" if index else f"photo{index}.jpg"), "wb").write(data)
        open(os.path.join(class_dir, "notes.txt"), "w").write("not an image")
    return png_pixels


BMP_HEADER = b"BM" + bytes(52)  # the signature of a Windows bitmap (its content does not matter here)
# Every file the converter does not take, relative to the input folder, and the reason it prints.
NOT_TAKEN = {
    os.path.join("banana", "broken.jpg"): "JPEG data does not decode",
    os.path.join("banana", "empty.jpg"): "empty file (0 bytes)",
    os.path.join("banana", "really_a_bitmap.jpg"):
        "content is a BMP image, not JPEG or PNG; save it as PNG to include it",
    os.path.join("banana", "scan.bmp"): "BMP image: only JPEG and PNG are converted; save it as PNG to include it",
    os.path.join("banana", "phone.webp"): "WebP image: only JPEG and PNG are converted; save it as PNG to include it",
    os.path.join("banana", ".DS_Store"): "hidden file (names starting with '.' are left out)",
    os.path.join("banana", ".thumbnails"): "hidden folder (left out with everything in it)",
    "README.md": "not in a class sub-folder; move it into the sub-folder of its class",
    **{os.path.join(name, "nested" if name == CLASSES[0] else "", "notes.txt"): "not a JPEG/PNG file name (.txt)"
       for name in CLASSES},
}


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    root = tmp_path_factory.mktemp("convert")
    input_dir, output_dir = str(root / "photos"), str(root / "records")
    png_pixels = make_folder(input_dir, CLASSES)
    banana = os.path.join(input_dir, "banana")
    for name, content in (("broken.jpg", b"\xff\xd8\xff" + bytes(range(200))), ("empty.jpg", b""),
                          ("really_a_bitmap.jpg", BMP_HEADER), ("scan.bmp", BMP_HEADER),
                          ("phone.webp", b"RIFF\x00\x00\x00\x00WEBPVP8 "), (".DS_Store", b"\x00")):
        open(os.path.join(banana, name), "wb").write(content)
    os.makedirs(os.path.join(banana, ".thumbnails"))
    open(os.path.join(banana, ".thumbnails", "img0.png"), "wb").write(encode_images([np.zeros((2, 2, 3), np.uint8)],
                                                                                      "png")[0])
    open(os.path.join(input_dir, "README.md"), "w").write("my photos")
    result = run_cli(f"--input_dir={input_dir}", f"--output_dir={output_dir}",
                     "--validation_fraction=0.2", "--seed=0", "--num_shards=2")
    return result, output_dir, png_pixels


def test_cli_prints_summary_and_every_file_it_did_not_take_with_the_reason(converted):
    result, output_dir, _ = converted
    assert result.returncode == 0, result.stderr
    total = len(CLASSES) * IMAGES_PER_CLASS
    assert f"classes: 3 ({', '.join(CLASSES)})" in result.stdout
    assert f"train: {total - 6} images" in result.stdout and "validation: 6 images" in result.stdout
    assert f"skipped: {len(NOT_TAKEN)} files" in result.stdout
    input_dir = os.path.join(os.path.dirname(output_dir), "photos")
    listed = dict(line.strip().split(": ", 1) for line in result.stdout.splitlines() if line.startswith("  "))
    assert listed == {os.path.join(input_dir, path): reason for path, reason in NOT_TAKEN.items()}


def test_output_files_labels_and_metadata(converted):
    _, output_dir, _ = converted
    assert open(os.path.join(output_dir, "labels.txt")).read() == "0:apple\n1:banana\n2:cherry\n"
    info = json.load(open(os.path.join(output_dir, "dataset_info.json")))
    assert info["class_names"] == CLASSES and info["channels"] == 3 and info["image_size"] == [SIZE, SIZE]
    assert sorted(info["skipped_files"]) == sorted(NOT_TAKEN)
    assert {name: split["num_samples"] for name, split in info["splits"].items()} == {"train": 24, "validation": 6}
    expected_files = {f"{split}-0000{i}-of-00002.tfrecord" for split in ("train", "validation") for i in (0, 1)}
    assert set(os.listdir(output_dir)) == expected_files | {"labels.txt", "dataset_info.json"}
    assert not [name for name in os.listdir(os.path.dirname(output_dir)) if ".partial-" in name]
    user_mode = 0o666 & ~current_umask()  # the script ran under this process's umask (0644 under 022)
    assert {name: os.stat(os.path.join(output_dir, name)).st_mode & 0o777 for name in os.listdir(output_dir)} == {
        name: user_mode for name in os.listdir(output_dir)}, "others read the data set as the umask says"


def test_records_read_back_through_the_factory(converted):
    _, output_dir, png_pixels = converted
    found_pngs = {}
    for split_name, per_class in (("train", 8), ("validation", 2)):
        spec = get_dataset("image_folder", split_name, output_dir)
        images, labels = read_all(spec.make_dataset)
        assert spec.num_samples == len(labels) == per_class * len(CLASSES)
        assert np.bincount(labels).tolist() == [per_class] * len(CLASSES), "the split is stratified"
        assert images.shape[1:] == (SIZE, SIZE, 3) and images.dtype == np.uint8
        assert spec.labels_to_names == dict(enumerate(CLASSES))
        for image, label in zip(images, labels):
            if image.tobytes() in png_pixels:
                found_pngs[image.tobytes()] = label
    assert found_pngs == png_pixels, "every PNG (grayscale one as 3 equal channels) comes back once, with its label"


@pytest.mark.parametrize("classes, message", [([], "has no class sub-folders"), (["only"], "single class sub-folder")])
def test_cli_rejects_empty_folder_and_single_class(tmp_path, classes, message):
    input_dir = tmp_path / "photos"
    input_dir.mkdir()
    make_folder(str(input_dir), classes)
    result = run_cli(f"--input_dir={input_dir}", f"--output_dir={tmp_path / 'out'}")
    check_bad_input(result, f"error: --input_dir={input_dir}")
    assert message in result.stderr
    assert not (tmp_path / "out").exists()


def test_cli_rejects_a_flag_value_of_the_wrong_type(tmp_path):
    result = run_cli(f"--input_dir={tmp_path}", f"--output_dir={tmp_path / 'out'}", "--validation_fraction=half")
    check_bad_input(result, "error: flag --validation_fraction=half: could not convert string to float")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("output_name, options, message", [
    ("new", {"validation_fraction": 1.0}, "--validation_fraction=1.0 is outside"),
    ("new", {"num_shards": 0}, "--num_shards=0 must be at least 1"),
    ("photos", {}, "exists and is not an empty folder"),
])
def test_bad_arguments_are_rejected_before_any_work(tmp_path, output_name, options, message):
    make_folder(str(tmp_path / "photos"), CLASSES[:2])
    with raises_naming(message):
        convert_image_folder(str(tmp_path / "photos"), str(tmp_path / output_name), **options)
    assert sorted(os.listdir(tmp_path)) == ["photos"]


def test_split_is_reproducible_from_the_seed(tmp_path):
    make_folder(str(tmp_path / "photos"), CLASSES[:2])
    outputs = {name: str(tmp_path / name) for name in ("seed0", "seed0_again", "seed5")}
    for name, output_dir in outputs.items():
        convert_image_folder(str(tmp_path / "photos"), output_dir, validation_fraction=0.3, seed=int(name[4]))

    def validation_bytes(name: str) -> bytes:
        return open(os.path.join(outputs[name], "validation-00000-of-00001.tfrecord"), "rb").read()

    assert validation_bytes("seed0") == validation_bytes("seed0_again")
    assert validation_bytes("seed0") != validation_bytes("seed5")


def test_failed_conversion_leaves_no_output(tmp_path):
    make_folder(str(tmp_path / "photos"), CLASSES[:2])
    empty_class = tmp_path / "photos" / "zebra"
    empty_class.mkdir()
    (empty_class / "fake.png").write_bytes(b"definitely not a png")
    with pytest.raises(ValueError, match="zebra holds no readable JPEG/PNG image"):
        convert_image_folder(str(tmp_path / "photos"), str(tmp_path / "out"))
    assert sorted(os.listdir(tmp_path)) == ["photos"]
