"""Rule families written from the emitters' sources: their data, and their messages' meaning.

The example lines are the emitters' own format strings (quoted in each family's `sources`)
filled in with plausible values; they are not corpus cases.
"""

from __future__ import annotations

import re

import pytest

from correlator.rules import classify_text
from correlator.rules.emitters import FAMILIES, FAMILY_FILES
from correlator.taxonomy import Blame, Category

HEX40 = re.compile(r"^[0-9a-f]{40}$")
G, NET, N, U = Category.GPU_HARDWARE, Category.INTERCONNECT, Category.NODE, Category.USER_CODE
H, S, T = Category.OOM_HOST, Category.SCHEDULER, Category.NCCL_TIMEOUT_UNKNOWN
BN, BJ, BI, BU = Blame.NODE, Blame.JOB, Blame.INFRA, Blame.UNKNOWN


def test_every_family_names_its_sources_and_every_rule_its_meaning() -> None:
    assert len(FAMILIES) == len(FAMILY_FILES) == 10
    names: set[str] = set()
    for fam in FAMILIES:
        assert fam.sources, fam.name
        for src in fam.sources:
            assert ("url" in src) or (src["repo"] and src["path"] and HEX40.match(src["commit"]))
        for rule in fam.rules:
            assert rule.name not in names, rule.name
            names.add(rule.name)
            assert rule.family == fam.name
            assert rule.culprit in {"printer", "peer", "peer_or_printer", "none"}
            assert rule.reason in {"", "exit", "xid"}
            if rule.culprit.startswith("peer"):
                assert "peer" in rule.regex.groupindex, rule.name


EXAMPLES = [
    # DCGM (dcgm_errors.h *_MSG)
    ("Detected 2 volatile double-bit ECC error(s) in GPU 3.", G, BN),
    ("GPU 1 had uncorrectable memory errors and row remapping failed.", G, BN),
    ("GPU 0 had memory errors and row remappings are pending", G, BN),
    ("Detected clocks event due to thermal violation in GPU 2.", G, BN),
    ("Detected clock throttling due to power violation in GPU 2.", G, BU),
    ("GPU 4's NvLink link 3 is currently down", NET, BN),
    ("Detected XID 79 for GPU 5", G, BN),
    ("Detected XID 13 for GPU 5", U, BJ),
    # nvidia-smi / NVML
    ("Failed to initialize NVML: Driver/library version mismatch", N, BN),
    (
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure "
        "that the latest NVIDIA driver is installed and running.",
        N,
        BN,
    ),
    ("        Pending Page Blacklist      : Yes", G, BN),
    # k8s-device-plugin, nvidia-container-cli
    ("XidCriticalError: Xid=48 on Device=GPU-1234; marking device as unhealthy.", G, BN),
    ("XidCriticalError: Xid=31 on Device=GPU-1234; marking device as unhealthy.", U, BJ),
    ("nvidia-container-cli: initialization error: nvml error: driver not loaded: unknown", N, BN),
    # CUDA runtime
    ("CUDA error: CUDA driver version is insufficient for CUDA runtime version", U, BJ),
    ("RuntimeError: CUDA error: all CUDA-capable devices are busy or unavailable", N, BN),
    ("cudaErrorSystemNotReady: system not yet initialized", N, BN),
    ("Program received signal CUDA_EXCEPTION_14, Warp Illegal Address.", U, BJ),
    # NCCL
    (
        "host-a:1:2 [0] misc/socket.cc:58 NCCL WARN socketProgress: Connection closed by "
        "remote peer host-b<40123>",
        NET,
        BU,
    ),
    (
        "host-a:1:2 [0] NCCL WARN Duplicate GPU detected : rank 1 and rank 0 both on CUDA "
        "device 1a000",
        U,
        BJ,
    ),
    (
        "host-a:1:2 [0] NCCL WARN Error while creating shared memory segment /dev/shm/nccl-x "
        "(size 9637888), error: No space left on device (28)",
        H,
        BJ,
    ),
    ("host-a:1:2 [0] NCCL WARN NET/IB : mlx5_0:1 async fatal event: port error", NET, BI),
    # IB verbs / UCX
    (
        "[h1:7:0:7] ib_mlx5_log.c:177  Transport retry count exceeded on mlx5_0:1/IB (synd "
        "0x15 vend 0x81 hw_synd 0/0)",
        NET,
        BI,
    ),
    # PyTorch
    (
        "[PG 0 Rank 25] Heartbeat monitor timed out! Process will be terminated after dumping "
        "debug info.",
        T,
        BU,
    ),
    (
        "[c10d] recvValue failed on SocketImpl(fd=9, addr=[h1]:5, remote=[h2]:29500): Failed "
        "to recv, got 0 bytes.",
        NET,
        BU,
    ),
    (
        "torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 0 "
        "(pid: 7) of binary: python",
        H,
        BU,
    ),
    ("RuntimeError: DataLoader worker (pid 4242) is killed by signal: Segmentation fault.", U, BJ),
    ("RuntimeError: [pair.cc:598] Connection closed by peer [10.0.0.42]:12345", NET, BU),
    # kubelet
    (
        "The node was low on resource: ephemeral-storage. Container c was using 1Gi, which "
        "exceeds its request of 0.",
        N,
        BN,
    ),
    ('Container c exceeded its local ephemeral storage limit "1Gi". ', U, BJ),
    (
        "Allocate failed due to no healthy devices present; cannot allocate unhealthy devices "
        "nvidia.com/gpu",
        G,
        BN,
    ),
    (
        "Ready False KubeletNotReady PLEG is not healthy: pleg was last seen active 3m10s ago; "
        "threshold is 3m0s",
        N,
        BN,
    ),
    ("      Exit Code:    139", U, BJ),
    ("Warning  BackOff  kubelet  Back-off restarting failed container", U, BJ),
    # Slurm
    ("srun: error: Node failure on gpu-07", N, BN),
    ("salloc: Prolog failure on node gpu-07", N, BN),
    ("srun: error: Unable to contact slurm controller (connect failure)", S, BI),
    ("srun: error: gpu-07: task 3: Killed", H, BU),
    ("srun: error: gpu-07: tasks 0-7: Exited with exit code 2", U, BJ),
    ("slurmstepd: error: execve(): train.sh: No such file or directory", U, BJ),
    (
        "   Reason=gres/gpu count reported lower than configured (7 < 8) "
        "[slurm@2024-12-19T11:03:34]",
        N,
        BN,
    ),
    # launchers
    (
        "[ERROR] [launch.py:341:sigkill_handler] ['python', 'train.py'] exits with return code "
        "= -9",
        H,
        BU,
    ),
    (
        "subprocess.CalledProcessError: Command '['python', 'x.py']' died with "
        "<Signals.SIGSEGV: 11>.",
        U,
        BJ,
    ),
    (
        "subprocess.CalledProcessError: Command '['python', 'x.py']' returned non-zero exit "
        "status 1.",
        U,
        BJ,
    ),
]


@pytest.mark.parametrize(("line", "category", "blame"), EXAMPLES, ids=[e[0][:50] for e in EXAMPLES])
def test_an_emitters_message_gets_its_documented_meaning(
    line: str, category: Category, blame: Blame
) -> None:
    v = classify_text(line)
    assert v is not None
    assert (v.category, v.blame) == (category, blame)


def test_a_peer_error_names_the_peer_and_never_the_printer() -> None:
    v = classify_text(
        "a:1:2 [0] misc/socket.cc:30 NCCL WARN socketProgressOpt: Call to recv from "
        "10.0.0.7<43210> failed : Connection reset by peer"
    )
    assert v is not None and v.culprit == "10.0.0.7" and not v.at_printer
    masked = classify_text("NCCL WARN Net : Call to recv from 172....<33759> failed : Broken pipe")
    assert masked is not None and masked.culprit is None and not masked.at_printer


def test_a_prolog_failure_blames_the_named_node_else_the_one_that_logged_it() -> None:
    named = classify_text("salloc: Prolog failure on node gpu-07")
    assert named is not None and named.culprit == "gpu-07" and not named.at_printer
    own = classify_text("error: [job 12] prolog failed status=1:0")
    assert own is not None and own.culprit is None and own.at_printer
