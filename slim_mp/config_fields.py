"""Config dataclass fields that carry their command-line help, and the one error that names an argument.

The scripts define one flag per field (``slim_mp.training.cli.define_flags``); declaring the help on
the field means a new option cannot get a flag without a description. This module sits at the
bottom of the package so config dataclasses of every layer can use it.

The same name is a library argument (``task=2``) and a script's flag (``--task=2``), so what names
it is written once and read in both spellings: the text marks the name with ``argument(name)``
(``argument(name, reads=...)`` when a library caller reads it otherwise, e.g. "the optimizer's
learning rate"); ``ArgumentError`` is the one error library code raises about what its caller can
change, and ``ArgumentText`` a log line's text that names one. Read as text they name library
arguments; the scripts' runner alone reads them as its flags (``command_line_message``,
``command_line_text``), where a flag's name differs from the argument's by ``flag_names``.
"""

import dataclasses
import re
from typing import Any, Mapping, Optional, Tuple

HELP_KEY = "help"
# Bracket an argument's name inside marked text (control characters, absent from flag values); the name may be
# followed by how a library caller reads it.
_MARK = "\x1f"
_READS = "\x1e"
_MARKED = re.compile(f"{_MARK}(\\w+)(?:{_READS}([^{_MARK}]*))?{_MARK}")
FlagNames = Mapping[str, str]


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


def argument(name: str, reads: Optional[str] = None) -> str:
    """``name`` marked as an argument: ``name`` (or ``reads``) to a library caller, ``--name`` to a script's user."""
    return f"{_MARK}{name}{_MARK}" if reads is None else f"{_MARK}{name}{_READS}{reads}{_MARK}"


def _as_arguments(text: str) -> str:
    return _MARKED.sub(lambda match: match.group(2) if match.group(2) is not None else match.group(1), text)


def as_flag(name: str) -> str:
    """``--name``: how a script's command line spells the argument ``name`` (a launcher writing one uses it too)."""
    return f"--{name}"


def _as_flags(text: str, flag_names: Optional[FlagNames]) -> str:
    return _MARKED.sub(lambda match: as_flag((flag_names or {}).get(match.group(1), match.group(1))), text)


class ArgumentError(ValueError):
    """A bad value of what the caller can change; the message names arguments as the library's caller wrote them.

    Raise it with the names marked: ``ArgumentError(f"{argument('task')}={task} is out of range ...")``
    reads ``task=2 is out of range ...``; ``command_line_message`` reads ``--task=2 ...`` for a script,
    whose flags are the config fields of the same names. Subclasses say which problem it is
    (``TrainDirInUseError``, ``TrainingDivergedError``, ...).
    """

    def __str__(self) -> str:
        return _as_arguments(self.marked)

    @property
    def marked(self) -> str:
        """The message with its arguments still marked: to quote it in another ``ArgumentError``."""
        return str(self.args[0])

    @property
    def arguments(self) -> Tuple[str, ...]:
        """The names of the arguments the message names, in order."""
        return tuple(match.group(1) for match in _MARKED.finditer(self.marked))


@dataclasses.dataclass(frozen=True)
class ArgumentText:
    """Text naming arguments (marked with ``argument``) for a log line: ``str()`` reads as the library's arguments,
    ``command_line_text`` as a script's flags."""

    marked: str

    def __str__(self) -> str:
        return _as_arguments(self.marked)


def marked_message(error: BaseException) -> str:
    """``error``'s message, with its arguments still marked when it is an ``ArgumentError`` (to quote it in one)."""
    return error.marked if isinstance(error, ArgumentError) else str(error)


def command_line_message(error: BaseException, flag_names: Optional[FlagNames] = None) -> str:
    """``error``'s message as a script's ``error:`` line says it: an ``ArgumentError``'s arguments named as flags
    (``flag_names`` maps an argument to its flag's name where they differ)."""
    return _as_flags(error.marked, flag_names) if isinstance(error, ArgumentError) else str(error)


def command_line_text(value: object, flag_names: Optional[FlagNames] = None) -> object:
    """An ``ArgumentText`` as a script's log line says it (its arguments named as flags); any other value as it is."""
    return _as_flags(value.marked, flag_names) if isinstance(value, ArgumentText) else value
