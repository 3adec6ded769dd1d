"""scripts/export_inference_graph.py without ``--batch_size``: the measured placement times the bfloat16 graph at
the serving batch sizes (``--serving_batch_sizes``, default 1 and 32) and the report names them; a bad list is
one ``error:`` line. The suite's fixed timings file decides the placement, so every CPU decides alike.
"""

import json
import os

import pytest

from script_runs import REPO_ROOT, check_bad_input, check_ok, run_script
from slim_mp.config_fields import ArgumentError
from slim_mp.export.exporter import export_model
from slim_mp.export.inference_graph import ExportConfig

EXPORT_SCRIPT = os.path.join(REPO_ROOT, "scripts", "export_inference_graph.py")
LENET = ("--model_name=lenet", "--dataset_name=fashion_mnist")


def exported_placement(tmp_path, *flags):
    """Export LeNet in bfloat16 (no weights) with ``flags``: (the script's stderr, the report's placement)."""
    report = tmp_path / "report.json"
    process = check_ok(run_script(EXPORT_SCRIPT, *LENET, "--precision=bfloat16", f"--output_file={tmp_path / 'g.pb'}",
                                  f"--mp_report={report}", *flags))
    return process.stderr, json.loads(report.read_text())["reports"][0]["placement"]


def test_an_export_without_batch_size_is_timed_at_the_serving_batch_sizes(tmp_path):
    log, placement = exported_placement(tmp_path)
    assert placement["timed"] and placement["timed_batches"] == [1, 32]
    assert len(placement["low_ops"]) == 4, "the fixed timings make bfloat16 pay at every batch: LeNet's 4 allow ops"
    assert "timed: forward (frozen weights) steps at batch 1 and 32)" in log


def test_the_serving_batch_sizes_flag_sets_them_and_a_batch_size_keeps_the_graphs_own(tmp_path):
    _, placement = exported_placement(tmp_path, "--serving_batch_sizes=8,2")
    assert placement["timed_batches"] == [2, 8]
    log, placement = exported_placement(tmp_path, "--batch_size=3")
    assert placement["timed_batches"] == []
    assert "timed: forward (frozen weights) steps at the graph's shapes)" in log


@pytest.mark.parametrize("value, expected", [
    ("0", "error: --serving_batch_sizes=0: the batch sizes an inference graph of unknown batch is timed at must be "
          "one or more positive integers"),
    ("1,x", "error: --serving_batch_sizes=1,x holds an item that is not int"),
])
def test_a_bad_serving_batch_sizes_is_one_error_line(tmp_path, value, expected):
    process = run_script(EXPORT_SCRIPT, *LENET, "--precision=bfloat16", f"--output_file={tmp_path / 'g.pb'}",
                         f"--serving_batch_sizes={value}")
    check_bad_input(process, expected)
    assert not (tmp_path / "g.pb").exists()


def test_the_library_names_the_argument_before_any_work(tmp_path):
    config = ExportConfig(model_name="lenet", dataset_name="fashion_mnist", output_file=str(tmp_path / "g.pb"),
                          serving_batch_sizes=(4, -1))
    with pytest.raises(ArgumentError) as raised:
        export_model(config, print_line=lambda line: None)
    assert str(raised.value).startswith("serving_batch_sizes=4,-1: ")
    assert not (tmp_path / "g.pb").exists()
