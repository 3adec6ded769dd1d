"""Profile a model's training step in float32 and in mixed precision: where the time and memory go.

    python scripts/profile_step.py --model_name=resnet_v1_50 --dataset_name=fashion_mnist \
        --train_image_size=224 --batch_size=8 --precision=bfloat16 --output_dir=runs/profile

Takes the training script's flags (model, data, preprocessing, optimizer, precision, loss scaling,
placement) and builds exactly the step ``train_image_classifier.py`` would run, once in float32 and
once in ``--precision``. Writes ``--output_dir``/profile.md (how parallel each step ran: op time over
the span, the critical path, idle core time, the op types on the critical path or running alone,
the casts on it; per op type: time, share, speed-up;
casts; GFLOP/s of convolutions and matrix products against this device's measured peak; the
largest tensors alive at the memory peak), profile.json (every op), profile.png, and each step's
Chrome trace, trace_float32.json and trace_<precision>.json (TensorFlow's timeline of the last traced
step: open it in Perfetto, https://ui.perfetto.dev, or chrome://tracing to see the cores' op lanes and
where the casts sit).
"""

import quiet_tensorflow_start  # noqa: F401  (first: TensorFlow loads without its start-up notices on screen)

from absl import flags

from slim_mp.devices import detect_device
from slim_mp.measure.profiling.device_peak import device_peak
from slim_mp.measure.profiling.profile_report import ProfileReport
from slim_mp.measure.profiling.profile_run import ProfileSteps, profile_both
from slim_mp.training import TrainConfig, cli

cli.define_flags(TrainConfig)
flags.DEFINE_string("output_dir", None, "Folder for profile.md, profile.json, profile.png and the Chrome traces.")
flags.DEFINE_integer("profile_warmup_steps", 3, "Untimed steps before measuring each configuration.")
flags.DEFINE_integer("profile_timed_steps", 5, "Untraced steps whose median is the step time.")
flags.DEFINE_integer("profile_traced_steps", 3, "Traced steps whose per-op median times are reported.")
flags.mark_flag_as_required("output_dir")
FLAGS = flags.FLAGS


def progress(line: str) -> None:
    print(line, flush=True)


def main() -> None:
    """Profile both configurations and write the three reports."""
    config = cli.config_from_flags(TrainConfig)
    steps = ProfileSteps(FLAGS.profile_warmup_steps, FLAGS.profile_timed_steps, FLAGS.profile_traced_steps)
    for name, value in (("--profile_timed_steps", steps.timed), ("--profile_traced_steps", steps.traced)):
        if value < 1:
            raise ValueError(f"{name}={value} must be at least 1.")
    device = detect_device()
    progress(f"device: {device.describe()}")
    float32, mixed = profile_both(config, f"{FLAGS.output_dir}/scratch_train_dirs", steps, progress)
    peaks = {precision: device_peak(device, precision) for precision in ("float32", mixed.label)}
    title = (f"{config.model_name}, batch {config.batch_size}, "
             f"{config.train_image_size or 'default'} px, {mixed.label} vs float32")
    for path in ProfileReport(title, float32, mixed, peaks).write_reports(FLAGS.output_dir).values():
        progress(f"wrote {path}")


if __name__ == "__main__":
    cli.run(main)
