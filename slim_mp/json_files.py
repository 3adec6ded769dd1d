"""JSON files written whole or not at all, and read back only in the shape their reader expects.

Writers go through a temporary file and a rename, so a reader never sees a half-written file; the
file then has the mode any file the user creates gets (``0o666`` less the umask: 0644 under umask
022), not the temporary's private 0600, so a dataset or a run folder one user writes others can read.
Readers state the shape they need as a small schema (below) and get either that shape or one
``JsonFileError`` naming the file and the first field that is wrong: a damaged or hand-edited file
never surfaces as an ``AttributeError`` deep inside the code that uses it.

Schemas are plain values:

- a type or a tuple of types (``str``, ``(int, float)``): the value is an instance (``bool`` never
  counts as a number);
- ``{"field": schema, ...}``: a JSON object holding at least these fields (more are allowed);
- ``MaybeMissing(schema)`` as a field's schema: the field may be missing;
- ``MappingOf(schema)``: an object of any keys whose values all match ``schema``;
- ``ListOf(schema)``: a list whose items all match ``schema``.
"""

import dataclasses
import json
import os
import tempfile
from typing import Any, Union


@dataclasses.dataclass(frozen=True)
class MappingOf:
    """An object with any keys, every value matching ``values``."""

    values: Any


@dataclasses.dataclass(frozen=True)
class ListOf:
    """A list, every item matching ``items``."""

    items: Any


@dataclasses.dataclass(frozen=True)
class MaybeMissing:
    """A field of an object schema that may be missing (when present it must match ``schema``)."""

    schema: Any


Schema = Union[type, tuple, dict, MappingOf, ListOf]


class JsonFileError(ValueError):
    """A JSON file that cannot be read, is not JSON, or does not have the expected shape.

    Attributes:
        path: the file.
        problem: what is wrong, naming the field (``'timings'["a"].float16``) where one is.
    """

    def __init__(self, path: str, problem: str):
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


_STATUS_FILE = "/proc/self/status"


def current_umask() -> int:
    """The process's umask, read without changing it where Linux shows it (``Umask:`` of /proc/self/status).

    Elsewhere it is read by setting and restoring it, which another thread creating a file at that
    instant would see.
    """
    try:
        with open(_STATUS_FILE, encoding="ascii") as status:
            return next(int(line.split()[1], 8) for line in status if line.startswith("Umask:"))
    except (OSError, StopIteration, ValueError, IndexError):
        umask = os.umask(0o022)
        os.umask(umask)
        return umask


def write_json_atomically(path: str, content: dict) -> None:
    """Write ``content`` as JSON to ``path`` through a temporary file in the same folder and a rename.

    The file gets the mode a newly created file gets under the user's umask (see the module docstring).
    """
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}-", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            os.fchmod(stream.fileno(), 0o666 & ~current_umask())
            json.dump(content, stream, indent=1, sort_keys=True)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise


def read_json_file(path: str, schema: Schema) -> Any:
    """The content of the JSON file ``path``, checked against ``schema`` (see the module docstring).

    Raises:
        FileNotFoundError: ``path`` does not exist (callers decide whether that is normal).
        JsonFileError: the file is unreadable, not JSON, or not of the expected shape.
    """
    try:
        with open(path, encoding="utf-8") as handle:
            content = json.load(handle)
    except FileNotFoundError:
        raise
    except (OSError, UnicodeDecodeError) as error:
        raise JsonFileError(path, f"cannot be read ({error})") from error
    except json.JSONDecodeError as error:
        raise JsonFileError(path, f"is not valid JSON ({error})") from error
    problem = shape_problem(content, schema)
    if problem:
        raise JsonFileError(path, problem)
    return content


def shape_problem(value: Any, schema: Schema, where: str = "the file") -> str:
    """Why ``value`` does not match ``schema`` (naming the field), or ``""`` when it does."""
    if isinstance(schema, dict):
        if not isinstance(value, dict):
            return f"{where} should be a JSON object, found {_kind(value)}"
        for field, field_schema in schema.items():
            if isinstance(field_schema, MaybeMissing):
                if field not in value:
                    continue
                field_schema = field_schema.schema
            elif field not in value:
                return f"{where} lacks the field {field!r}"
            problem = shape_problem(value[field], field_schema, _field(where, field))
            if problem:
                return problem
        return ""
    if isinstance(schema, MappingOf):
        if not isinstance(value, dict):
            return f"{where} should be a JSON object, found {_kind(value)}"
        for key, item in value.items():
            problem = shape_problem(item, schema.values, _field(where, key))
            if problem:
                return problem
        return ""
    if isinstance(schema, ListOf):
        if not isinstance(value, list):
            return f"{where} should be a list, found {_kind(value)}"
        for index, item in enumerate(value):
            problem = shape_problem(item, schema.items, f"{where}[{index}]")
            if problem:
                return problem
        return ""
    types = schema if isinstance(schema, tuple) else (schema,)
    if isinstance(value, bool) and bool not in types:
        return f"{where} should be {_names(types)}, found a boolean"
    if not isinstance(value, types):
        return f"{where} should be {_names(types)}, found {_kind(value)}"
    return ""


def _field(where: str, field: str) -> str:
    return f"field {field!r}" if where == "the file" else f"{where}[{field!r}]"


def _kind(value: Any) -> str:
    names = {dict: "a JSON object", list: "a list", str: "a string", bool: "a boolean",
             int: "a number", float: "a number", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def _names(types: tuple) -> str:
    names = {dict: "a JSON object", list: "a list", str: "a string", bool: "a boolean",
             int: "an integer", float: "a number", type(None): "null"}
    return " or ".join(names.get(kind, kind.__name__) for kind in types)
