"""Config dataclass fields that carry their command-line help, so a flag's name, default and help live together.

The scripts define one flag per field (``slim_mp.training.cli.define_flags``); declaring the help on
the field means a new option cannot get a flag without a description. This module sits at the
bottom of the package so config dataclasses of every layer can use it.
"""

import dataclasses
from typing import Any

HELP_KEY = "help"


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
