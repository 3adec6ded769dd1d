"""The JSON reader returns the expected shape or one error naming the file and the wrong field."""

import os

import pytest

from slim_mp.json_files import (
    JsonFileError, ListOf, MappingOf, MaybeMissing, current_umask, read_json_file, write_json_atomically,
)

DECISIONS = {"version": int, "ops": MappingOf(str), "note": MaybeMissing(str), "runs": ListOf((int, float))}


def _write(tmp_path, text: str) -> str:
    path = os.path.join(str(tmp_path), "file.json")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
    return path


def test_a_file_of_the_expected_shape_reads_back_as_written(tmp_path):
    content = {"version": 1, "ops": {"a/Conv2D": "bfloat16"}, "runs": [1, 2.5], "extra": True}
    path = os.path.join(str(tmp_path), "ok.json")
    write_json_atomically(path, content)
    assert read_json_file(path, DECISIONS) == content
    assert os.listdir(str(tmp_path)) == ["ok.json"]


@pytest.mark.parametrize("text, problem", [
    ("[1, 2]", "the file should be a JSON object, found a list"),
    ('{"ops": {}, "runs": []}', "the file lacks the field 'version'"),
    ('{"version": "1", "ops": {}, "runs": []}', "field 'version' should be an integer, found a string"),
    ('{"version": true, "ops": {}, "runs": []}', "field 'version' should be an integer, found a boolean"),
    ('{"version": 1, "ops": {"a": 3}, "runs": []}', "field 'ops'['a'] should be a string, found a number"),
    ('{"version": 1, "ops": {}, "runs": [1, "x"]}', "field 'runs'[1] should be an integer or a number, found a string"),
    ('{"version": 1, "ops": {}, "runs": [], "note": 5}', "field 'note' should be a string, found a number"),
    ('{"version": 1,', "is not valid JSON"),
])
def test_a_damaged_file_is_one_error_naming_the_file_and_the_field(tmp_path, text, problem):
    path = _write(tmp_path, text)
    with pytest.raises(JsonFileError) as raised:
        read_json_file(path, DECISIONS)
    assert raised.value.path == path
    assert str(raised.value).startswith(f"{path}: {problem}")


def test_a_missing_file_is_left_to_the_caller(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_json_file(os.path.join(str(tmp_path), "absent.json"), DECISIONS)


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600)],
                         ids=["umask-022", "umask-027", "umask-077"])
def test_a_written_file_has_the_mode_the_umask_gives_new_files(tmp_path, umask, mode):
    """Not the temporary file's private 0600: a dataset converted by one user is readable by others (umask 022)."""
    previous = os.umask(umask)
    try:
        assert current_umask() == umask
        path = os.path.join(str(tmp_path), "info.json")
        write_json_atomically(path, {"a": 1})
    finally:
        os.umask(previous)
    assert os.stat(path).st_mode & 0o777 == mode
