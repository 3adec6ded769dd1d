"""Command-line flags shared by the training and evaluation scripts, and the runner that reports bad input.

Each flag is defined from a field of a config dataclass (``TrainConfig``, ``EvalConfig``,
``ParityConfig`` and the settings they nest), so a flag's name, default and help are written once,
on the field (``slim_mp.config_fields.option``); ``config_from_flags`` builds the dataclass back
from the parsed flags. Every script runs its ``main`` through ``run``.

This is the one place the library's argument names become flags (``--name``; ``FLAG_NAMES`` where
a flag's name differs): in an ``ArgumentError``'s ``error:`` line, in a library log line's
``ArgumentText`` and in a field's help.
"""

import dataclasses
import logging
import sys
import traceback
import typing
from typing import Any, Callable, Dict, Optional, Sequence, Type, TypeVar

from absl import app
from absl import flags as absl_flags
from absl import logging as absl_logging

from slim_mp.config_fields import ArgumentText, command_line_message, command_line_text, field_help
from slim_mp.training.memory_fit import OutOfMemoryError, memory_exhaustion, memory_limit, out_of_memory_sentence
from slim_mp.training.precision_flags import FLAG_NAMES

FLAGS = absl_flags.FLAGS
ConfigT = TypeVar("ConfigT")

EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130

absl_flags.DEFINE_boolean("verbose", False, "Print the full traceback when the run fails.")

_DEFINERS: Dict[type, Callable[..., Any]] = {
    str: absl_flags.DEFINE_string,
    int: absl_flags.DEFINE_integer,
    float: absl_flags.DEFINE_float,
    bool: absl_flags.DEFINE_boolean,
}


def _value_type(annotation: Any) -> Any:
    """Strip ``Optional[...]`` from a field annotation."""
    if typing.get_origin(annotation) is typing.Union:
        return next(arg for arg in typing.get_args(annotation) if arg is not type(None))
    return annotation


def define_flags(config_type: type, help_overrides: Optional[Dict[str, str]] = None) -> None:
    """Define one absl flag per field of ``config_type`` (recursing into nested dataclasses), skipping defined ones.

    The help text is the one declared on the field with ``slim_mp.config_fields.option``, unless
    ``help_overrides`` gives a script's own meaning of a shared field (e.g. ``precision`` in a tool
    that only inspects); tuple fields become comma-separated list flags.

    Raises:
      TypeError: if a field (other than a nested dataclass) has no help text.
    """
    for field in dataclasses.fields(config_type):
        value_type = _value_type(field.type)
        if dataclasses.is_dataclass(value_type):
            define_flags(value_type, help_overrides)
            continue
        help_text = command_line_text(ArgumentText(field_help(config_type, field)), FLAG_NAMES)
        help_text = (help_overrides or {}).get(field.name, help_text)
        if field.name in FLAGS:
            continue
        if typing.get_origin(value_type) is tuple:
            absl_flags.DEFINE_list(field.name, [str(item) for item in field.default], help_text)
        else:
            _DEFINERS[value_type](field.name, field.default, help_text)


def config_from_flags(config_type: Type[ConfigT]) -> ConfigT:
    """Build ``config_type`` from the parsed flags (nested dataclasses included); list flags become tuples."""
    values = {}
    for field in dataclasses.fields(config_type):
        value_type = _value_type(field.type)
        if dataclasses.is_dataclass(value_type):
            values[field.name] = config_from_flags(value_type)
        elif typing.get_origin(value_type) is tuple:
            items = [item for item in FLAGS[field.name].value or () if item]
            values[field.name] = _list_items(field.name, items, typing.get_args(value_type)[0])
        else:
            values[field.name] = FLAGS[field.name].value
    return config_type(**values)


def _list_items(name: str, items: Sequence[str], item_type: type) -> tuple:
    """Convert the items of list flag ``name`` to ``item_type``; ValueError naming the flag for a bad item."""
    try:
        return tuple(item_type(item) for item in items)
    except ValueError as error:
        raise ValueError(
            f"--{name}={','.join(items)} holds an item that is not {item_type.__name__}; pass e.g. --{name}=3,7."
        ) from error


def _parse_flags(argv: Sequence[str]) -> list:
    """Parse the command line; on a bad flag print one line naming it and exit with ``EXIT_BAD_INPUT``."""
    try:
        return FLAGS(list(argv))
    except absl_flags.Error as error:
        message = "; ".join(line for line in str(error).splitlines() if line)  # one line even for several flags
        print(f"error: {message}; run with --helpshort to see the flags.", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)


def _report_and_exit(error: BaseException, message: str, code: int) -> None:
    """Print ``error: message`` (after the traceback under --verbose) and exit with ``code``."""
    if FLAGS.verbose:
        traceback.print_exception(error)
    print(f"error: {message}", file=sys.stderr)
    sys.exit(code)


class _FlagsInLogLines(logging.Filter):
    """A library log line that names an argument (an ``ArgumentText`` among its arguments) names the flag."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and any(isinstance(value, ArgumentText) for value in record.args):
            record.args = tuple(command_line_text(value, FLAG_NAMES) for value in record.args)
        return True


def _name_flags_in_log_lines() -> None:
    """Have absl's handler (where the library's log lines end) name flags in them (idempotent)."""
    handler = absl_logging.get_absl_handler()
    if not any(isinstance(existing, _FlagsInLogLines) for existing in handler.filters):
        handler.addFilter(_FlagsInLogLines())


def _list_in_short_help() -> None:
    """Show the flags defined here (those of the config dataclasses, ``--verbose``) in the script's ``--helpshort``.

    absl files a flag under the module that called ``DEFINE_*`` (this one), while ``--helpshort``
    lists only the flags of the program being run.
    """
    for flag in FLAGS.get_key_flags_for_module(__name__):
        FLAGS.register_key_flag_for_module(sys.argv[0], flag)


def run(main: Callable[..., None], takes_arguments: bool = False) -> None:
    """Run ``main`` as a command-line program.

    Bad input (``UsageError``, ``ValueError``, ``TypeError``) prints one ``error: ...`` line
    naming the flag and the fix and exits with status 2, with the traceback only under
    ``--verbose``; so does memory that ran out (``memory_fit``: a step that named its settings says
    ``--batch_size``, the precision and the benchmark command that finds what fits; elsewhere the
    sentence names the process's limit). Ctrl-C exits with status 130 and SIGTERM during training
    with 143 (training saves a checkpoint first). With
    ``takes_arguments`` the arguments after ``--`` are passed to ``main`` as a list; otherwise
    any positional argument is an error.
    """

    def guarded(argv: Sequence[str]) -> None:
        try:
            if takes_arguments:
                main(list(argv[1:]))
                return
            if len(argv) > 1:
                raise app.UsageError(
                    f"unexpected argument {argv[1]!r}; pass every option as a --flag=value pair."
                )
            main()
        except KeyboardInterrupt as interrupt:  # Ctrl-C, or SIGTERM during training (its own message and status)
            code = getattr(interrupt, "exit_code", EXIT_INTERRUPTED)
            _report_and_exit(interrupt, str(interrupt) or "interrupted", code)
        except Exception as error:  # re-raised below unless memory ran out or the input is bad
            exhausted = None if isinstance(error, OutOfMemoryError) else memory_exhaustion(error)
            if exhausted is not None:
                _report_and_exit(error, out_of_memory_sentence(exhausted, None, memory_limit()), EXIT_BAD_INPUT)
            if isinstance(error, (app.UsageError, ValueError, TypeError)):  # a library argument's names its flag
                _report_and_exit(error, command_line_message(error, FLAG_NAMES), EXIT_BAD_INPUT)
            raise

    _list_in_short_help()
    _name_flags_in_log_lines()
    app.run(guarded, flags_parser=_parse_flags)
