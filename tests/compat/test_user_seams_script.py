"""The official-style script with the lines of docs/compatibility.md (``train_step_fn=slim_mp.train_step`` in its
``slim.learning.train`` call), run as a user runs it, in a process of its own, with slim's defaults.

- A float16 run at a learning rate that diverges: the first step's update at 1e6 pushes conv1's
  variables beyond float16's range, so every later step is skipped (the script, like the official
  one, never checks the loss itself) until the loss-scale guard fires at the minimum scale; the
  output ends with one ``error:`` sentence naming the first non-finite op (a float16 cast of a conv1
  variable), with no traceback.
- Progress lines show the loss scale and the skipped steps.
"""

import re
import subprocess
import sys

import pytest

import script_runs
from test_user_training_script import SCRIPT, _official_records

PROGRESS = re.compile(r"\] (step=(\d+) loss=\S+ loss_scale=(\S+) skipped=(\d+) images/s=\d+)$")


def _command(tmp_path, write_official_records, *args: str) -> list:
    data_dir = tmp_path / "data"
    data_dir.mkdir(exist_ok=True)
    _official_records(data_dir, write_official_records, train_count=160, test_count=32)
    return [sys.executable, SCRIPT, "--mode=train", f"--dataset_dir={data_dir}", "--num_samples=160",
            "--batch_size=8", *args]


@pytest.mark.slow  # 115 float16 steps (emulated on a CPU), each skipped one replayed: ~9 s of CPU
def test_a_diverging_float16_run_ends_with_one_sentence_naming_the_first_nonfinite_op(tmp_path,
                                                                                      write_official_records):
    process = subprocess.run(
        _command(tmp_path, write_official_records, f"--train_dir={tmp_path / 'train'}", "--max_number_of_steps=50",
                 "--log_every_n_steps=1", "--precision=float16", "--learning_rate=1e6", "--debug_nonfinite"),
        capture_output=True, text=True, env=script_runs.script_env(), timeout=script_runs.TIMEOUT_S)
    assert process.returncode == 1, process.stderr[-3000:]
    assert "Traceback" not in process.stderr and "Detected at node" not in process.stderr
    last = process.stderr.strip().splitlines()[-1]
    assert re.fullmatch(
        r"error: Training diverged: 100 steps in a row were skipped with the loss scale at its minimum \(1\), .*"
        r"\(at step 2\)\. Diagnosis \(debug_nonfinite=True\): the first non-finite value came from op "
        r"'conv1/[^']+' \(Cast, forward pass, low precision \(float16\)\) at loss scale 1\.", last), last
    assert last.count("Training diverged") == 1 and process.stderr.count("100 steps in a row") == 1  # said once
    progress = [match.groups()[1:] for match in map(PROGRESS.search, process.stderr.splitlines()) if match]
    assert progress[0] == ("1", "32768", "0")  # the first step is finite, at the initial scale 2**15
    skipped = [int(count) for _, _, count in progress]
    assert skipped == sorted(skipped) and skipped[-1] >= 100  # the count of skipped steps rises to the guard's
    assert progress[-1][1] == "1"


HISTOGRAM_SYMPTOM = re.compile(
    r"error: Training diverged: '(\S+)' holds (inf|NaN), so its TensorBoard histogram summary failed; lower the "
    r"optimizer's learning rate or check the input data \(at step (\d+)\)\. Diagnosis \(debug_nonfinite=True\): "
    r"(.*)\.")


@pytest.mark.slow  # the run above, with the official summaries every second
def test_a_divergence_whose_histogram_summary_fails_first_still_ends_in_the_divergence_sentence(
        tmp_path, write_official_records):
    """Every second the Supervisor's thread summarises the activations; once they overflow float16 the histogram
    fails, usually long before the guard's 100 skipped steps. Which comes first depends on timing: either way the
    run ends in one divergence sentence naming conv1's cast, the first non-finite value (replayed by the step
    function after a skipped step, or, when the summary failed first, as the Coordinator is told)."""
    process = subprocess.run(
        _command(tmp_path, write_official_records, f"--train_dir={tmp_path / 'train'}", "--max_number_of_steps=50",
                 "--log_every_n_steps=1", "--precision=float16", "--learning_rate=1e6", "--debug_nonfinite",
                 "--save_summaries_secs=1"),
        capture_output=True, text=True, env=script_runs.script_env(), timeout=script_runs.TIMEOUT_S)
    assert process.returncode == 1, process.stderr[-3000:]
    assert "Traceback" not in process.stderr and "Infinity in" not in process.stderr
    last = process.stderr.strip().splitlines()[-1]
    symptom = HISTOGRAM_SYMPTOM.fullmatch(last)
    if symptom is None:
        assert last.startswith("error: Training diverged: 100 steps in a row were skipped"), last
    assert re.search(r"Diagnosis \(debug_nonfinite=True\): the first non-finite value came from op 'conv1/[^']+' "
                     r"\(Cast, forward pass, low precision \(float16\)\)", last), last
