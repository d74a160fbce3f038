"""A file viewed at a shell prompt shows what the file holds, not the prompt host's own output.

`tail -f slurm-1234.out` or `less train.log` typed on a login node prints a job's output, written
wherever the job ran; the prompt's host must not become the culprit of what the file says. The
host's own logs and kernel files (/var/log, /proc, /sys), `dmesg`, and a program the host runs stay
its own. Prompts as bash's distro defaults (SUSE's among them), zsh's "%m%# " and fish's default
write them (cited in correlator/explain/hosts.py and hosts_fields.py); the lines are NVRM's Xid
("NVRM: Xid (PCI:%04x:%02x:%02x): %d, ...", open-gpu-kernel-modules) behind dmesg's clock and
PyTorch's uncorrectable ECC error (c10/cuda/CUDAException.h's "CUDA error: %s", the CUDA runtime's
cudaErrorECCUncorrectable text).
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text

XID = (
    "[ 2345.678901] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, "
    "GPU has fallen off the bus."
)
ECC = "RuntimeError: CUDA error: uncorrectable ECC error encountered"
PROMPTS = {
    "bash_rhel": "[alice@{h} ~]$ ",
    "bash_debian": "alice@{h}:~/runs$ ",
    "root": "[root@{h} ~]# ",
    "zsh": "{h}% ",
    "fish": "alice@{h} ~/runs> ",
    "suse": "alice@{h}:~/runs> ",
    "suse_root": "{h}:~ # ",
}
HOSTS = ("login01", "gpu-a-07", "node0123")
VIEWS = (
    "tail -n 50 slurm-1234.out",
    "tail -f logs/train_rank0.log",
    "cat job.err",
    "less train.log",
    "grep -n error slurm-88.out",
    "head -100 output.txt",
    "sudo cat /scratch/alice/run7/stderr",
)
OWN = (
    "grep -i xid /var/log/messages",
    "sudo tail /var/log/kern.log",
    "cat /proc/driver/nvidia/gpus/0000:3b:00.0/information",
    "dmesg -T | tail",
    "python train.py",
)


@pytest.mark.parametrize("prompt", sorted(PROMPTS))
@pytest.mark.parametrize("command", VIEWS)
@pytest.mark.parametrize("host", HOSTS)
def test_a_file_viewed_at_a_prompt_does_not_name_the_prompt_host(
    prompt: str, command: str, host: str
) -> None:
    for line in (XID, ECC):
        got = explain_text(PROMPTS[prompt].format(h=host) + command + "\n" + line + "\n")
        assert (got.category, got.blame, got.node) == ("gpu_hardware", "node", None)


@pytest.mark.parametrize("prompt", sorted(PROMPTS))
@pytest.mark.parametrize("command", OWN)
@pytest.mark.parametrize("host", ("gpu-a-07", "node0123"))
def test_the_hosts_own_logs_and_programs_at_a_prompt_still_name_it(
    prompt: str, command: str, host: str
) -> None:
    line = ECC if command.startswith("python") else XID
    got = explain_text(PROMPTS[prompt].format(h=host) + command + "\n" + line + "\n")
    assert (got.category, got.blame, got.node) == ("gpu_hardware", "node", host)
