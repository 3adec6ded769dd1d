"""``ArgumentError``: one message, read with the library's argument names or with the scripts' flags."""

import pickle

from slim_mp.config_fields import ArgumentError, argument, command_line_message


def test_an_argument_error_names_arguments_to_a_caller_and_flags_to_a_command_line():
    error = ArgumentError(f"{argument('task')}=2 is out of range for {argument('worker_replicas')}=2; pass 0 to 1.")
    assert isinstance(error, ValueError)
    assert str(error) == "task=2 is out of range for worker_replicas=2; pass 0 to 1."
    assert command_line_message(error) == "--task=2 is out of range for --worker_replicas=2; pass 0 to 1."


def test_only_marked_names_become_flags():
    error = ArgumentError(f"{argument('master')}=grpc://task:2 names a task")
    assert command_line_message(error) == "--master=grpc://task:2 names a task"


def test_other_errors_read_the_same_everywhere_and_a_pickled_argument_error_keeps_both_readings():
    plain = "--precision='x' is not a precision"
    assert command_line_message(ValueError(plain)) == plain
    copy = pickle.loads(pickle.dumps(ArgumentError(f"{argument('num_clones')}=0 must be positive")))
    assert str(copy) == "num_clones=0 must be positive"
    assert command_line_message(copy) == "--num_clones=0 must be positive"
