"""SIGTERM, what preemption sends, saves the current step like Ctrl-C and exits 143 with one line saying so."""

import re
import signal
import subprocess
import sys

from script_runs import LENET_ARGS, TRAIN_SCRIPT, abort_after, checkpoint_tensor, finish_or_show_stacks, script_env

TERMINATED_LINE = re.compile(
    r"^error: terminated by SIGTERM at step (\d+); saved (\S+); rerun the same command to resume$"
)


def test_sigterm_saves_the_current_step_and_exits_143(tmp_path):
    train_dir = str(tmp_path / "preempted")
    process = subprocess.Popen(
        [sys.executable, TRAIN_SCRIPT, f"--train_dir={train_dir}", "--log_every_n_steps=1", *LENET_ARGS],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=script_env(),
    )
    try:
        last_printed = None
        with abort_after(process, 120):
            for line in process.stdout:
                if line.startswith("step="):
                    last_printed = int(line.split()[0].split("=")[1])
                    if last_printed == 3:
                        process.send_signal(signal.SIGTERM)
                        break
        _, stderr = finish_or_show_stacks(process, 120)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 143, stderr[-2000:]
    assert "Traceback" not in stderr
    match = TERMINATED_LINE.match(stderr.strip().splitlines()[-1])
    assert match, stderr[-2000:]
    step = int(match.group(1))
    assert step >= last_printed  # the steps already run are saved: none lost
    assert match.group(2).endswith(f"model.ckpt-{step}")
    assert checkpoint_tensor(train_dir, "global_step") == step
