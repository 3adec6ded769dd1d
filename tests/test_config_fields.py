"""``ArgumentError``: one message, read with the library's argument names or with the scripts' flags."""

import pickle

from slim_mp.config_fields import (ArgumentError, ArgumentText, argument, as_flag, command_line_message,
                                  command_line_text, marked_message)


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


def test_an_argument_a_caller_reads_otherwise_and_a_flag_of_another_name():
    error = ArgumentError(f"lower {argument('learning_rate', reads='the optimizer learning rate')}; see "
                          f"{argument('debug_nonfinite', reads='debug_nonfinite=True')}")
    assert str(error) == "lower the optimizer learning rate; see debug_nonfinite=True"
    assert command_line_message(error, {"debug_nonfinite": "mp_debug_nonfinite"}) == (
        "lower --learning_rate; see --mp_debug_nonfinite")
    assert error.arguments == ("learning_rate", "debug_nonfinite")


def test_a_quoted_argument_error_keeps_its_arguments_and_a_log_line_names_them_too():
    inner = ArgumentError(f"{argument('dataset_dir')}=/data is empty")
    outer = ArgumentError(f"{marked_message(inner)}; saved model.ckpt-3")
    assert command_line_message(outer) == "--dataset_dir=/data is empty; saved model.ckpt-3"
    assert marked_message(ValueError("plain")) == "plain"
    line = ArgumentText(f"{argument('train_dir')}=runs/a: taking over the lock")
    assert str(line) == "train_dir=runs/a: taking over the lock"
    assert command_line_text(line) == "--train_dir=runs/a: taking over the lock"
    assert command_line_text(3) == 3 and as_flag("task") == "--task"
