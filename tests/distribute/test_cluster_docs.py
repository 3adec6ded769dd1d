"""docs/operations.md's Kubeflow TFJob manifest and Slurm batch script start the scripts with flags they accept.

Each command line is read from the document and run by the script it names, with a ``TF_CONFIG``
that is not JSON: a script that parsed every flag then stops at that, with its one ``error:`` line
about ``TF_CONFIG`` (an unknown or malformed flag would be the error instead).
"""

import json
import os
import re
import shlex
from typing import List, Tuple

import pytest

from script_runs import REPO_ROOT, check_bad_input, run_script
from slim_mp.distribute.cluster import PRIVATE_CLUSTER_DOC
from slim_mp.distribute.local_cluster import CLUSTER_FLAGS

OPERATIONS = os.path.join(REPO_ROOT, "docs", "operations.md")
PS_SCRIPT, TRAIN_SCRIPT = "scripts/parameter_server.py", "scripts/train_image_classifier.py"


def read_operations() -> str:
    with open(OPERATIONS, encoding="utf-8") as handle:
        return handle.read()


def blocks(language: str) -> List[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", read_operations(), flags=re.M | re.S)


def tfjob_commands() -> List[Tuple[str, List[str]]]:
    """(replica type, command) of each replica of the TFJob manifest; commands are written as JSON lists."""
    (manifest,) = [block for block in blocks("yaml") if "kind: TFJob" in block]
    replicas = re.split(r"^    (PS|Worker|Chief):\n", manifest, flags=re.M)[1:]
    return [(kind, json.loads(re.search(r"command: (\[.*?\])", spec, flags=re.S).group(1)))
            for kind, spec in zip(replicas[::2], replicas[1::2])]


def slurm_script() -> str:
    (script,) = [block for block in blocks("bash") if "#SBATCH" in block]
    return script


def slurm_lines() -> List[Tuple[range, List[str]]]:
    """(ranks, command) of each line of the batch script's ``srun --multi-prog`` configuration."""
    configuration = re.search(r"<<'EOF'\n(.*?)^EOF$", slurm_script(), flags=re.M | re.S).group(1)
    lines = []
    for line in configuration.splitlines():
        ranks, command = line.split(maxsplit=1)
        first, _, last = ranks.partition("-")
        lines.append((range(int(first), int(last or first) + 1), shlex.split(command)))
    return lines


def documented_commands() -> List[List[str]]:
    return [command for _, command in tfjob_commands()] + [command for _, command in slurm_lines()]


def test_the_documents_hold_a_tfjob_with_ps_and_worker_replicas_and_a_slurm_step_over_every_rank():
    assert [kind for kind, _ in tfjob_commands()] == ["PS", "Worker"]
    ranks = [rank for rank_range, _ in slurm_lines() for rank in rank_range]
    nodes, per_node = (int(re.search(rf"^#SBATCH --{name}=(\d+)$", slurm_script(), flags=re.M).group(1))
                       for name in ("nodes", "ntasks-per-node"))
    assert ranks == list(range(nodes * per_node))


@pytest.mark.parametrize("command", documented_commands(), ids=lambda command: " ".join(command)[:60])
def test_each_documented_command_runs_a_script_that_accepts_its_flags(command, monkeypatch):
    python, script, *args = command
    assert python == "python" and script in (PS_SCRIPT, TRAIN_SCRIPT)
    assert not [arg for arg in args if arg.lstrip("-").split("=")[0] in CLUSTER_FLAGS[:3]], "the cluster gives those"
    monkeypatch.setenv("TF_CONFIG", "not json")
    check_bad_input(run_script(os.path.join(REPO_ROOT, script), *args), "error: TF_CONFIG is not valid JSON")


def test_each_job_runs_its_script():
    for kind, (_, script, *_) in tfjob_commands():
        assert script == (PS_SCRIPT if kind == "PS" else TRAIN_SCRIPT), kind
    for ranks, (_, script, *args) in slurm_lines():
        (num_ps,) = {int(arg.split("=")[1]) for arg in args if arg.startswith("--num_ps_tasks=")}
        assert all((rank < num_ps) == (script == PS_SCRIPT) for rank in ranks), (ranks, script)


def test_the_warning_names_a_section_of_the_document():
    section = re.search(r'"(.*)"', PRIVATE_CLUSTER_DOC).group(1)
    assert f"\n### {section}\n" in read_operations()
    (policy,) = [block for block in blocks("yaml") if "kind: NetworkPolicy" in block]
    assert policy.count("{matchLabels: {slim-mp-job: resnet-bf16}}") == 2
    assert read_operations().count("labels: {slim-mp-job: resnet-bf16}") == 2  # on both replicas of the TFJob
