"""Config dataclass fields that carry their command-line help, so a flag's name, default and help live together.

The scripts define one flag per field (``slim_mp.training.cli.define_flags``); declaring the help on
the field means a new option cannot get a flag without a description. This module sits at the
bottom of the package so config dataclasses of every layer can use it.

The same name is a library argument (``task=2``) and a script's flag (``--task=2``), so an error
about it is written once and read in both spellings: the message marks the name with
``argument(name)``, an ``ArgumentError`` reads ``task`` to a library caller, and
``command_line_message`` gives the scripts' ``error:`` line ``--task``.
"""

import dataclasses
import re
from typing import Any

HELP_KEY = "help"
# Brackets an argument's name inside an ``ArgumentError`` message (a control character, absent from flag values).
_MARK = "\x1f"
_MARKED = re.compile(f"{_MARK}(\\w+){_MARK}")


def option(default: Any, help: str) -> Any:
    """A dataclass field with ``default`` whose flag is described by ``help``.

    Args:
      default: the field's (and the flag's) default; an immutable value.
      help: one-line description shown by ``--help``.

    Returns:
      A ``dataclasses.field`` holding ``help`` in its metadata.

    Raises:
      ValueError: if ``help`` is empty.
    """
    if not help.strip():
        raise ValueError("option(): the help text is empty; say what the flag does.")
    return dataclasses.field(default=default, metadata={HELP_KEY: help})


def field_help(owner: type, field: dataclasses.Field) -> str:
    """The help text declared on ``field`` of dataclass ``owner``.

    Args:
      owner: the dataclass declaring ``field`` (named in the error).
      field: one of ``dataclasses.fields(owner)``.

    Returns:
      The text given to ``option``.

    Raises:
      TypeError: if the field was declared without help (not with ``option``).
    """
    text = field.metadata.get(HELP_KEY)
    if not text:
        raise TypeError(
            f"{owner.__name__}.{field.name} has no help text; declare it as "
            f"{field.name}: ... = option(default, help='...')."
        )
    return text


def argument(name: str) -> str:
    """``name`` marked as an argument in an ``ArgumentError``: ``task`` to a caller, ``--task`` to a script's user."""
    return f"{_MARK}{name}{_MARK}"


class ArgumentError(ValueError):
    """A bad argument value; the message names arguments as the library's caller wrote them.

    Raise it with the names marked: ``ArgumentError(f"{argument('task')}={task} is out of range ...")``
    reads ``task=2 is out of range ...``; ``command_line_message`` reads ``--task=2 ...`` for a script,
    whose flags are the config fields of the same names.
    """

    def __str__(self) -> str:
        return _MARKED.sub(r"\1", str(self.args[0]))


def command_line_message(error: BaseException) -> str:
    """``error``'s message as a script's ``error:`` line says it: an ``ArgumentError``'s arguments named as flags."""
    if isinstance(error, ArgumentError):
        return _MARKED.sub(r"--\1", str(error.args[0]))
    return str(error)
