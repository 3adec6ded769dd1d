"""What a parity comparison runs, checked before any training starts: ``ParityConfig`` and its checks.

``RunSettings`` (``run_settings``) holds what every run shares and checks it; this adds the
seeds, the control arm and the output folder. Every check raises one ``ValueError`` naming the flag
at fault and what to pass instead (the script prints it as its ``error:`` line).
"""

import dataclasses
import os
from typing import Tuple

from slim_mp.config_fields import option
from slim_mp.datasets import DatasetSpec
from slim_mp.measure.parity.run_settings import RunSettings, check_run_settings
from slim_mp.training import prepare_output_dir

# The control arm: float32 again, from the initial weights times (1 + CONTROL_PERTURBATION * N(0, 1)).
CONTROL_ARM = "float32_perturbed"
CONTROL_PERTURBATION = 1e-6
PARITY_JSON = "parity.json"


@dataclasses.dataclass(frozen=True)
class ParityConfig(RunSettings):
    """What to compare: the shared run settings, the seeds, the control and where the results go."""

    seeds: Tuple[int, ...] = option(
        (0, 1, 2), "Comma-separated seeds, e.g. 0,1,2; seeds new to an --output_dir holding an earlier comparison "
        "(same flags) are added to it."
    )
    output_dir: str = option("runs/parity", "Where results and runs are written.")
    control: bool = option(
        True, f"Also train float32 from the initial weights x (1 + {CONTROL_PERTURBATION:g} N(0,1)) for every seed: "
        "the gap float32 shows against itself."
    )

    @property
    def arms(self) -> Tuple[str, ...]:
        """Every run of a seed, in the order they are trained: the precisions, then the control if asked for."""
        return (*self.precisions, CONTROL_ARM) if self.control else self.precisions


def _check_seeds(seeds: Tuple[int, ...]) -> None:
    if not seeds:
        raise ValueError("--seeds is empty; pass one or more comma-separated seeds such as --seeds 0,1,2.")
    if len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise ValueError(f"--seeds={','.join(map(str, seeds))} must be distinct non-negative integers; "
                         "pass e.g. --seeds 0,1,2.")


def seed_dir(config: ParityConfig, seed: int) -> str:
    """The folder of one seed's initial checkpoint and runs."""
    return os.path.join(config.output_dir, f"seed_{seed}")


def check_parity_config(config: ParityConfig) -> Tuple[DatasetSpec, str]:
    """Raise ValueError naming the flag at fault before any training starts; return the train set and eval split."""
    train_set, split_name = check_run_settings(config)
    _check_seeds(config.seeds)
    prepare_output_dir(config.output_dir, "output_dir")
    for seed in config.seeds:
        if os.path.exists(seed_dir(config, seed)):
            raise ValueError(f"--output_dir={config.output_dir} already holds {seed_dir(config, seed)} from an "
                             "earlier comparison; pass --seeds it does not hold yet (to add them), a new --output_dir, "
                             "or delete that folder.")
    return train_set, split_name
