"""Rule families written from the emitters' sources: their data, and their messages' meaning.

The example lines are the emitters' own format strings (quoted in each family's `sources`)
filled in with plausible values; they are not corpus cases.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from correlator.rules import classify_text, emitters
from correlator.rules.emitters import FAMILIES, FAMILY_FILES
from correlator.taxonomy import Blame, Category

HEX40 = re.compile(r"^[0-9a-f]{40}$")
G, NET, N, U = Category.GPU_HARDWARE, Category.INTERCONNECT, Category.NODE, Category.USER_CODE
GOOM = Category.OOM_GPU
H, S, T = Category.OOM_HOST, Category.SCHEDULER, Category.NCCL_TIMEOUT_UNKNOWN
BN, BJ, BI, BU = Blame.NODE, Blame.JOB, Blame.INFRA, Blame.UNKNOWN


def test_every_family_names_its_sources_and_every_rule_its_meaning() -> None:
    shipped = {p.name for p in Path(emitters.__file__).parent.glob("*.json")}
    assert len(FAMILIES) == len(FAMILY_FILES) == len(shipped) >= 17
    assert set(FAMILY_FILES) == shipped  # no family file left unloaded
    names: set[str] = set()
    for fam in FAMILIES:
        assert fam.sources, fam.name
        for src in fam.sources:
            assert ("url" in src) or (src["repo"] and src["path"] and HEX40.match(src["commit"]))
        for rule in fam.rules:
            assert rule.name not in names, rule.name
            names.add(rule.name)
            assert rule.family == fam.name
            culprits = {"printer", "peer", "peer_or_printer", "printer_names_peer", "none"}
            assert rule.culprit in culprits
            assert rule.reason in {"", "exit", "xid", "xid_mention"}
            if "peer" in rule.culprit:
                # the peer's host, or (culprit "peer" only) the peer's MPI rank
                groups = rule.regex.groupindex
                ranked = rule.culprit == "peer" and "peer_rank" in groups
                assert "peer" in groups or ranked, rule.name


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
    ("More than 10 single-bit ECC error(s) detected in GPU 0 Volatile SBEs: 30", G, BU),
    ("GPU 0 only achieved a memory bandwidth of 500.00 GB/s, failing to meet 1200.00 GB/s", G, BU),
    ("Detected 40.00 gflops for GPU 0 which is below the threshold 50.00", G, BU),
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
    (
        "torch.multiprocessing.spawn.ProcessExitedException: process 1 terminated with "
        "signal SIGKILL",
        H,
        BU,
    ),
    ("Process finished with exit code 134 (interrupted by signal 6: SIGABRT)", U, BJ),
    ('    "exitCode": 137,', H, BU),
    # Open MPI / PRRTE (help-prun.txt, help-errmgr-base.txt), MPICH Hydra
    (
        "prterun noticed that process rank 3 with PID 812 on node gpu-07 exited on signal 11 "
        "(Segmentation fault).",
        U,
        BJ,
    ),
    ("ORTE has lost communication with a remote daemon.", NET, BU),
    ("  Remote daemon: [[11377,0],1] on node gpu-08", NET, BU),
    ("A process exceeded memory limits:", H, BJ),
    ("MPI_ABORT was invoked on rank 0 in communicator MPI_COMM_WORLD with errorcode 1.", U, BJ),
    ("=   KILLED BY SIGNAL: 9 (Killed)", H, BU),
    ("YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Segmentation fault (signal 11)", U, BJ),
    # Ray (ray-oom-prevention.rst, node_manager.cc)
    (
        "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.",
        H,
        BJ,
    ),
    (
        "(raylet) node_manager.cc:3277: 2 Workers (tasks / actors) killed due to memory "
        "pressure (OOM), 0 Workers crashed due to other reasons at node (ID: ab, IP: 10.0.0.7)",
        H,
        BJ,
    ),
    # older kubelets, device plugin RPCs, the GPU operator's own daemons
    ("The node was low on resource: nodefs.", N, BN),
    (
        "Warning  UnexpectedAdmissionError  kubelet  Allocate failed due to rpc error: code = "
        "Unavailable desc = transport is closing, which is unexpected",
        N,
        BN,
    ),
    ("nvidia-operator-validator-d5c26   0/1   Init:CrashLoopBackOff   4 (24s ago)   25m", N, BN),
    (
        "stderr: nvidia-container-cli.real: initialization error: driver error: failed to process "
        "request: unknown",
        N,
        BN,
    ),
    ("  exitcode  : -11 (pid: 5277) (SIGSEGV)", U, BJ),
    (
        "ResourceExhaustedError: OOM when allocating tensor with shape[64,512] and type float "
        "on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc",
        Category.OOM_GPU,
        BJ,
    ),
    ("NVRM: The NVIDIA probe routine failed for 1 device(s).", N, BN),
    ("       1234   train   REQUEUED      0:0", S, BI),
    ("ConnectionResetError: [Errno 104] Connection reset by peer", NET, BU),
    ("yaml.scanner.ScannerError: mapping values are not allowed here", U, BJ),
    # Linux kernel (arch/x86/kernel/cpu/mce/core.c, block/blk-core.c, fs/nfs/client.c)
    # printed for corrected machine checks too (mce_notify_irq): the node, blame not settled
    ("mce: [Hardware Error]: Machine check events logged", N, BU),
    ("blk_update_request: I/O error, dev nvme0n1, sector 2048 op 0x1:(WRITE) flags 0x0", N, BN),
    ("nfs: server storage01 not responding, still trying", N, BI),
    # Slurm node configuration, CUDA catch-alls
    ("slurmd: fatal: can't stat gres.conf file /dev/nvidia0: No such file or directory", N, BN),
    ("RuntimeError: cuInit returned error 999 CUDA_ERROR_UNKNOWN", G, BN),
    ("RuntimeError: CUDA error: operation not supported", U, BJ),
    (
        "NCCL WARN unlink shared memory /dev/shm/nccl-d5rTd0 failed, error: No such file or "
        "directory",
        N,
        BN,
    ),
    # NCCL checks.h / cudawrap.h: CUDACHECK and CUCHECK, and ncclGetErrorString's texts
    ("gpu-07:1:2 [0] enqueue.cc:58 NCCL WARN Cuda failure 1 'invalid argument'", U, BJ),
    ("gpu-07:1:2 [0] include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'", GOOM, BJ),
    ("NCCL WARN Cuda failure 214 'uncorrectable ECC error encountered'", G, BN),
    ("NCCL failure common.cu:908 'unhandled cuda error'", U, BJ),
    ("ncclUnhandledCudaError: Call to CUDA function failed.", U, BJ),
    # NCCLCHECK's back trace alone: ncclSystemError / ncclRemoteError, ncclUnhandledCudaError
    ("gpu-07:1050:1316 [0] NCCL INFO transport/net.cc:515 -> 2", NET, BU),
    ("gpu-07:1050:1316 [0] NCCL INFO misc/socket.cc:750 -> 6", NET, BU),
    ("gpu-07:1050:1316 [0] NCCL INFO group.cc:64 -> 1 [Async thread]", U, BJ),
    # runc / Go os/exec: the container's command is not in its image
    (
        "OCI runtime create failed: runc create failed: unable to start container process: exec: "
        '"python": executable file not found in $PATH: unknown',
        U,
        BJ,
    ),
    # c10/cuda/CUDAFunctions.cpp
    ("RuntimeError: No CUDA GPUs are available", U, BJ),
    ("RuntimeError: Found no NVIDIA driver on your system. Please check that you have", N, BN),
    ("CUDA driver initialization failed, you might not have a CUDA gpu.", N, BN),
    ("The NVIDIA driver on your system is too old (found version 10010). Please update", U, BJ),
    # Paddle's DataLoader (data_loader.cc): the same shared-memory reading as PyTorch's
    (
        "ERROR: Unexpected BUS error encountered in DataLoader worker. This might be caused by "
        "insufficient shared memory (shm), please check whether use_shared_memory is set",
        H,
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


def test_an_mpi_rank_killed_on_a_node_names_that_node_unless_masked() -> None:
    line = "mpirun noticed that process rank 7 with PID 0 on node {} exited on signal 9 (Killed)."
    named = classify_text(line.format("gpu-07"))
    assert named is not None and named.culprit == "gpu-07" and not named.at_printer
    for masked in ("HOSTNAME", "xxxxxxxx"):
        v = classify_text(line.format(masked))
        assert v is not None and v.category == Category.OOM_HOST and v.culprit is None


def test_a_pals_rank_signal_names_its_node_and_sigterm_is_the_launchers_teardown() -> None:
    line = "{}: rank 27421 died from signal {}"
    abort = classify_text(line.format("x4213c4s7b0n0.hsn.cm.aurora.alcf.anl.gov", 6))
    assert abort is not None and (abort.category, abort.blame) == (U, BJ)
    assert abort.culprit == "x4213c4s7b0n0.hsn.cm.aurora.alcf.anl.gov" and not abort.at_printer
    term = classify_text(line.format("x4417c3s5b0n0", 15))
    assert term is not None and term.category != U


def test_nccl_return_code_trace_is_a_weak_symptom_never_a_root_cause() -> None:
    trace = classify_text("gpu-07:1:2 [0] NCCL INFO init.cc:1303 -> 2")
    assert trace is not None and not trace.root_cause and trace.culprit is None
    assert classify_text("gpu-07:1:2 [0] NCCL INFO init.cc:1303 -> 3") is None  # internal


def test_slurmctld_names_the_node_that_failed_not_the_controller() -> None:
    lines = [
        "[2024-01-01T00:00:00.000] error: Nodes gpu-07 not responding, setting DOWN",
        "[2024-01-01T00:00:00.000] requeue JobId=12 due to failure of node gpu-07",
        "[2024-01-01T00:00:00.000] Killing JobId=12 on failed node gpu-07",
        "error: Node gpu-07 has low real_memory size (1000 < 2000)",
    ]
    for line in lines:
        v = classify_text(line)
        assert v is not None and (v.category, v.blame) == (N, BN), line
        assert v.culprit == "gpu-07" and not v.at_printer, line
    ranged = classify_text("error: Nodes gpu-[07-08] not responding, setting DOWN")
    assert ranged is not None and ranged.category == N and ranged.culprit is None
    qos = classify_text(
        "srun: error: Unable to allocate resources: Job violates accounting/QOS policy"
    )
    assert qos is not None and (qos.category, qos.blame) == (S, BJ)


def test_a_family_catch_all_never_shadows_a_specific_rule() -> None:
    ecc = classify_text("RuntimeError: CUDA error: uncorrectable ECC error encountered")
    assert ecc is not None and (ecc.category, ecc.blame) == (G, BN)
    generic = classify_text("RuntimeError: CUDA error: operation not supported")
    assert generic is not None and generic.priority < ecc.priority
    oom = classify_text("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")
    assert oom is not None and oom.category is Category.OOM_GPU  # not the exception catch-all
    bare = classify_text("yaml.scanner.ScannerError: mapping values are not allowed here")
    assert bare is not None and not bare.root_cause and bare.confidence <= 0.3


def test_a_prolog_failure_blames_the_named_node_else_the_one_that_logged_it() -> None:
    named = classify_text("salloc: Prolog failure on node gpu-07")
    assert named is not None and named.culprit == "gpu-07" and not named.at_printer
    own = classify_text("error: [job 12] prolog failed status=1:0")
    assert own is not None and own.culprit is None and own.at_printer
