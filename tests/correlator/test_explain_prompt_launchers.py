"""An MPI or DeepSpeed launcher typed at a prompt names the prompt's host only when it ran there.

Open MPI's mpirun (docs/launching-apps: "If no hosts are specified, mpirun launches on the local
host") and MPICH's Hydra mpiexec start every rank on the local host unless given a host list
(-H/--host/--hostfile/--machinefile, Hydra's -f/-hosts); DeepSpeed's launcher reads its
-H/--hostfile (or --include/--num_nodes over it). With a host list the ranks run on the nodes named
there, so the prompt's host is only the launch node and must not become the culprit; PBS's qsub and
LSF's bsub always run elsewhere. Bash's, zsh's, fish's and SUSE's prompts read alike (they did not
before: bash named the host in front of every launcher, zsh and fish in front of none). The line is
PyTorch's uncorrectable ECC error (c10/cuda/CUDAException.h's "CUDA error: %s").
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text
from tests.correlator.test_explain_prompt_views import ECC, PROMPTS

LOCAL = (
    "mpirun -n 4 ./train",
    "mpirun -np 8 --bind-to core python train.py",
    "mpiexec -n 2 ./a.out",
    "deepspeed train.py --deepspeed_config ds.json",
    "sudo mpirun --allow-run-as-root -np 4 ./hemelb",
)
ELSEWHERE = (
    "mpirun -np 16 --hostfile hosts ./train",
    "mpirun -np 16 -hostfile hosts.txt ./train",
    "mpirun -H gpu-01,gpu-02 -np 2 ./train",
    "mpirun --host gpu-01:8,gpu-02:8 python train.py",
    "mpirun --machinefile nodes -np 32 ./a.out",
    "mpiexec -f hosts -n 16 ./a.out",
    "mpiexec.hydra -hosts gpu-01,gpu-02 -n 2 ./a.out",
    "deepspeed --hostfile=/job/hostfile train.py",
    "deepspeed -H hostfile --num_nodes 2 train.py",
    "qsub -l select=2:ngpus=4 train.pbs",
    "bsub -n 8 -gpu num=4 ./train.sh",
)


@pytest.mark.parametrize("prompt", sorted(PROMPTS))
@pytest.mark.parametrize("command", LOCAL)
def test_a_launcher_without_a_host_list_names_the_prompt_host(prompt: str, command: str) -> None:
    got = explain_text(PROMPTS[prompt].format(h="gpu-a-07") + command + "\n" + ECC + "\n")
    assert (got.category, got.blame, got.node) == ("gpu_hardware", "node", "gpu-a-07")


@pytest.mark.parametrize("prompt", sorted(PROMPTS))
@pytest.mark.parametrize("command", ELSEWHERE)
def test_a_launcher_given_other_hosts_does_not_name_the_prompt_host(
    prompt: str, command: str
) -> None:
    got = explain_text(PROMPTS[prompt].format(h="login-01") + command + "\n" + ECC + "\n")
    assert (got.category, got.blame, got.node) == ("gpu_hardware", "node", None)
