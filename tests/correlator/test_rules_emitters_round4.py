"""Round four of the emitter families: messages read from the emitters' own sources.

Each line is an emitter's format string (quoted in its family's `sources`) filled in with
plausible values, never a corpus case: DCGM 4.6's dcgm_errors.h *_MSG strings, the CUDA driver
API's cuGetErrorString texts as PyTorch prints them, NCCL's WARN formats, systemd's service
messages, PyTorch's c10d/elastic/Gloo messages, vLLM's KV-cache check, Ray's, glibc's abort
messages, kernel lines (NVRM, NVMe, GHES, Lustre, segfaults), RDMA error completions
(rdma-core's mlx5 provider, Open MPI openib, UCX, mlx5_core), kubelet's and the node lifecycle
controller's pod reasons, Slurm's slurm_errno.c strings and job reason codes, and launchers'
exit statuses read by the signal reasoner. The tests on what the node, Ray, the store and
launchers name (device plugins' missing GPUs, peers, signals) are in
test_rules_emitters_round4_peers.py.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text
from correlator.rules import classify_text
from correlator.taxonomy import Blame, Category

G, NET, N, U = Category.GPU_HARDWARE, Category.INTERCONNECT, Category.NODE, Category.USER_CODE
GOOM, H, S = Category.OOM_GPU, Category.OOM_HOST, Category.SCHEDULER
BN, BJ, BI, BU = Blame.NODE, Blame.JOB, Blame.INFRA, Blame.UNKNOWN

EXAMPLES = [
    # DCGM 4.6 dcgm_errors.h: the peer-to-peer messages' newer wording
    ("GPU 3 unsuccessfully wrote data to GPU 5 over NVLink in a peer-to-peer test: err", G, BN),
    ("GPU 5 was unsuccessfully written to by GPU 3 over PCIe in a peer-to-peer test: err", G, BN),
    ("GPU 5 was unsuccessfully written to by GPU 3 in a peer-to-peer test: err", G, BN),
    # DCGM_FR_UNCORRECTABLE_ROW_REMAP_LIMIT, DCGM_FR_SRAM_THRESHOLD: run a field diagnostic
    ("GPU 2 exceeded uncorrectable row remap limit with 512 remapped rows", G, BN),
    ("SRAM Threshold Count exceeded on GPU 1: 12", G, BN),
    # DCGM_FR_GPU_RECOVERY_*: the driver's recovery action for a GPU fault
    ("GPU 4 requires a reset to recover from a fault. Recovery action: 1 (GPU_RESET).", G, BN),
    (
        "GPU 4 fault may have left the OS in an inconsistent state. Recovery action: 2 "
        "(NODE_REBOOT).",
        G,
        BN,
    ),
    (
        "GPU 0 operating at reduced capacity due to a fault. Recovery action: 4 (DRAIN_AND_RESET).",
        G,
        BN,
    ),
    # DCGM_FR_CONTAINED_ERROR: restart the application, GPU reset can wait: not settled
    ("GPU had a contained error.", G, BU),
    # DCGM_FR_NVLINK_*_BER_THRESHOLD, fabric state, ECC pending
    ("Detected effective BER 1.20e-09 exceeds minimum threshold on GPU 6's NVLink.", NET, BN),
    ("GPU 1: Fabric State is In Progress (1).", NET, BN),
    ("ECC memory for GPU 0 is in a pending state.", N, BN),
    ("Temperature 95 of GPU 3 exceeded user-specified maximum allowed temperature 85", G, BN),
    # CUDA driver API (cuGetErrorString), as PyTorch prints it
    ("RuntimeError: CUDA error: uncorrectable NVLink error detected during the execution", NET, BN),
    ("cudaErrorNvlinkUncorrectable", NET, BN),
    (
        "RuntimeError: CUDA error: Invalid access of peer GPU memory over nvlink or a hardware "
        "error",
        G,
        BU,
    ),
    (
        "RuntimeError: CUDA error: MPS client failed to connect to the MPS control daemon or the "
        "MPS server",
        N,
        BN,
    ),
    ("RuntimeError: CUDA error: the MPS client has been terminated by the server", N, BU),
    ("RuntimeError: CUDA error: device doesn't have valid Grid license", N, BN),
    ("RuntimeError: CUDA error: unknown error", G, BU),
    ("RuntimeError: CUDA driver error: out of memory", GOOM, BJ),
    ("RuntimeError: CUDA driver error: invalid argument", U, BJ),
    # the host's driver stack (nvidia-installer, modprobe, nvidia-smi, the driver container)
    ("ERROR: Unable to load the kernel module 'nvidia.ko'.  This happens most frequently", N, BN),
    ("modprobe: FATAL: Module nvidia not found in directory /lib/modules/5.15.0-91-generic", N, BN),
    ("NVIDIA-SMI couldn't find libnvidia-ml.so library in your system.", N, BN),
    ("Could not unload NVIDIA driver kernel modules, driver is in use", N, BN),
    # vLLM's KV-cache check (kv_cache_utils.py)
    (
        "ValueError: No available memory for the cache blocks. Try increasing "
        "`gpu_memory_utilization` when initializing the engine.",
        GOOM,
        BJ,
    ),
    (
        "ValueError: To serve at least one request with the models's max seq len (8192), (2.63 "
        "GiB KV cache is needed, which is larger than the available KV cache memory (1.64 GiB).",
        GOOM,
        BJ,
    ),
    # NCCL src/include/alloc.h, ras.cc, dev_runtime.cc
    ("gpu-07:1:2 [0] include/alloc.h:185 NCCL WARN Failed to CUDA calloc 6291456 bytes", GOOM, BJ),
    ("gpu-07:1:2 [0] NCCL WARN Failed to CUDA host alloc 4194304 bytes", H, BJ),
    (
        "gpu-07:1:2 [0] NCCL WARN NCCL version mismatch with remote peer gpu-08 (local: 22105, "
        "remote 21805)",
        U,
        BJ,
    ),
    # systemd: a node daemon the GPU stack or the scheduler needs died
    (
        "Jun 01 10:00:00 gpu-07 systemd[1]: nvidia-fabricmanager.service: Main process exited, "
        "code=exited, status=1/FAILURE",
        N,
        BN,
    ),
    ("Jun 01 10:00:00 gpu-07 systemd[1]: slurmd.service: Failed with result 'exit-code'.", N, BN),
    # kubelet: pkg/util/node NodeLost, graceful node shutdown, lifecycle/predicate.go admission
    ("Message: Pod was terminated in response to imminent node shutdown.", N, BU),
    (
        "Warning  OutOfmemory  1m  kubelet  Node didn't have enough resource: memory, requested: "
        "64000000000, used: 100, capacity: 1000",
        S,
        BI,
    ),
    (
        "Warning  OutOfnvidia.com/gpu  1m  kubelet  Node didn't have enough resource: "
        "nvidia.com/gpu, requested: 1, used: 8, capacity: 8",
        G,
        BU,
    ),
    # Slurm slurm_errno.c ESLURM_* for a rejected request, job reason codes, sacct DEADLINE
    (
        "srun: error: Unable to allocate resources: Invalid account or account/partition "
        "combination specified",
        S,
        BJ,
    ),
    (
        "sbatch: error: Batch job submission failed: Requested time limit is invalid (missing or "
        "exceeds some limit)",
        S,
        BJ,
    ),
    ("   JobState=PENDING Reason=BadConstraints Dependency=(null)", S, BJ),
    ("   JobState=FAILED Reason=RaisedSignal:9_Killed Dependency=(null)", H, BU),
    ("   JobState=FAILED Reason=RaisedSignal:11_Segmentation_fault Dependency=(null)", U, BJ),
    ("12|train|DEADLINE|0:0", S, BJ),
    # PBS mom and LSF termination reasons
    ("=>> PBS: job killed: walltime 3610 exceeded limit 3600", S, BJ),
    ("=>> PBS: job killed: mem 1234kb exceeded limit 1000kb", H, BJ),
    ("TERM_MEMLIMIT: job killed after reaching LSF memory usage limit.", H, BJ),
    ("TERM_RUNLIMIT: job killed after reaching LSF run time limit.", S, BJ),
    ("TERM_OWNER: job killed by owner.", S, BJ),
    ("TERM_PREEMPT: job killed after preemption.", S, BI),
    ("TERM_HOST: job killed after the host it was running on was rebooted or shut down.", N, BN),
    # the kernel: NVRM API mismatch / unsupported GPU, NVMe timeouts, GHES fatal, Lustre, crashes
    (
        "kernel: NVRM: API mismatch: the client has the version 535.104.05, but this kernel "
        "module has the version 525.85.12.",
        N,
        BN,
    ),
    (
        "kernel: NVRM: The NVIDIA GPU 0000:3b:00.0 (PCI ID: 10de:2330) installed in this system "
        "is not supported by the 470.82 NVIDIA driver release.",
        N,
        BN,
    ),
    ("kernel: nvme nvme0: I/O 123 QID 4 timeout, aborting", N, BN),
    ("kernel: {1}[Hardware Error]: event severity: fatal", N, BN),
    (
        "kernel: LustreError: 11-0: scratch-OST0004-osc: operation ost_read to node "
        "10.0.0.9@o2ib failed: rc = -107",
        N,
        BI,
    ),
    ("kernel: python[1234]: segfault at 0 ip 00007f sp 00007f error 4 in libc.so.6", U, BJ),
    # PyTorch c10d / elastic / Gloo (ProcessGroupNCCL.cpp, distributed_c10d.py, socket.cpp)
    (
        "torch.distributed.DistBackendError: [3] is setting up NCCL communicator and retrieving "
        "ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got "
        "error: Socket Timeout",
        NET,
        BU,
    ),
    (
        "RuntimeError: Timed out initializing process group in store based barrier on rank: 3, "
        "for key: store_based_barrier_key:1 (world_size=4, worker_count=3, timeout=0:30:00)",
        NET,
        BU,
    ),
    (
        "RuntimeError: Rank 1 successfully reached monitoredBarrier, but received errors while "
        "waiting for send/recv from rank 0. Please check rank 0 logs for faulty rank.",
        Category.NCCL_TIMEOUT_UNKNOWN,
        BU,
    ),
    (
        "torch.distributed.elastic.multiprocessing.api.SignalException: Process 12 got signal: 9",
        H,
        BU,
    ),
    (
        "[rank5]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank 5] Observed flight recorder dump "
        "signal from another rank via TCPStore.",
        Category.NCCL_TIMEOUT_UNKNOWN,
        BU,
    ),
    (
        "[W socket.cpp:436] [c10d] The server socket has failed to listen on [::]:29500 (errno: "
        "98 - Address already in use).",
        U,
        BJ,
    ),
    (
        "UserWarning: CUDA initialization: CUDA unknown error - this may be due to an incorrectly "
        "set up environment, e.g. changing env variable CUDA_VISIBLE_DEVICES after program start.",
        G,
        BN,
    ),
    # glibc malloc_printerr / __stack_chk_fail: the process corrupted its own memory
    ("free(): invalid pointer", U, BJ),
    ("double free or corruption (!prev)", U, BJ),
    ("*** stack smashing detected ***: terminated", U, BJ),
    # libnvidia-container's CUDA requirement check; Docker with no GPU device driver
    (
        "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.2, please "
        "update your driver to a newer version, or use an earlier cuda container: unknown",
        U,
        BJ,
    ),
    (
        'docker: Error response from daemon: could not select device driver "" with '
        "capabilities: [[gpu]].",
        N,
        BN,
    ),
]


@pytest.mark.parametrize(("line", "category", "blame"), EXAMPLES, ids=[e[0][:50] for e in EXAMPLES])
def test_a_round_four_message_gets_its_documented_meaning(
    line: str, category: Category, blame: Blame
) -> None:
    v = classify_text(line)
    assert v is not None
    assert (v.category, v.blame) == (category, blame)


def test_a_services_clean_exit_or_a_users_own_unit_is_no_node_fault() -> None:
    clean = "gpu-07 systemd[1]: kubelet.service: Main process exited, code=exited, status=0/SUCCESS"
    assert classify_text(clean) is None
    own = "gpu-07 systemd[1]: train.service: Main process exited, code=killed, status=9/KILL"
    assert classify_text(own) is None
    fine = classify_text("GPU 1: Fabric State is Completed (3).")
    assert fine is None or fine.category is not NET


def test_a_lost_node_is_the_node_the_controller_names() -> None:
    v = classify_text("Message: Node gpu-07 which was running pod train-0 is unresponsive")
    assert v is not None and (v.category, v.blame) == (N, BN)
    assert v.culprit == "gpu-07" and not v.at_printer


def test_a_signalled_launcher_follows_the_signal_reasoner() -> None:
    term = classify_text(
        "torch.distributed.elastic.multiprocessing.api.SignalException: Process 12 got signal: 15"
    )
    assert term is not None and term.category is None and not term.root_cause


def test_rdma_error_completions_are_pinned_to_the_host_that_polled_them() -> None:
    own = classify_text("mlx5: gpu-07: got completion with error:")
    assert own is not None and (own.category, own.blame) == (NET, BI) and own.culprit == "gpu-07"
    unnamed = classify_text("mlx5: host_unknown: got completion with error:")
    assert unnamed is not None and unnamed.culprit is None and unnamed.at_printer
    openib = explain_text(
        "[gpu-07][[1234,1],0][btl_openib_component.c:3644:handle_wc] from gpu-07 to: gpu-08 "
        "error polling LP CQ with status RETRY EXCEEDED ERROR status number 12 for wr_id 0x0"
    )
    assert (openib.category, openib.blame, openib.node) == ("interconnect", "infra", "gpu-07")
    nic = explain_text(
        "Jan 01 10:00:00 gpu-07 kernel: mlx5_core 0000:5e:00.0: mlx5_fw_fatal_reporter_err_work:"
        "690:(pid 1234): Driver is in error state. Unloading"
    )
    assert (nic.category, nic.node) == ("interconnect", "gpu-07")


def test_a_ucx_endpoint_that_gave_up_is_a_symptom_naming_nobody() -> None:
    for line in (
        "[1700000000.1] [gpu-07:12345:0]   rc_mlx5_common.c:423  UCX  ERROR Endpoint timeout",
        "[gpu-07:12345] pml_ucx.c:419 Error: ucp_ep_create(proc=3) failed: Destination is "
        "unreachable",
    ):
        v = classify_text(line)
        assert v is not None and (v.category, v.blame) == (NET, BU), line
        assert not v.root_cause and v.culprit is None and not v.at_printer


def test_nccl_shm_fallocate_is_the_jobs_shm_and_a_plugin_fallback_is_no_failure() -> None:
    shm = classify_text(
        "gpu-07:1:2 [0] include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space "
        "left on device"
    )
    assert shm is not None and (shm.category, shm.blame) == (H, BJ)
    plugin = classify_text(
        "gpu-07:1:2 [0] NCCL WARN NET/Plugin : dlerror=libnccl-net.so: cannot open shared object "
        "file: No such file or directory No plugin found (libnccl-net.so), using internal "
        "implementation"
    )
    assert plugin is not None and plugin.category is None and not plugin.root_cause
    assert explain_text("gpu-07:1:2 [0] NCCL WARN NET/Plugin : No plugin found").category is None


def test_a_corrected_hardware_error_is_no_failure() -> None:
    assert classify_text("kernel: {1}[Hardware Error]: event severity: corrected") is None


def test_nccl_tests_name_their_host_and_a_quoted_last_error_decides() -> None:
    quoted = explain_text(
        "gpu-07: Test NCCL failure common.cu:958 'remote process exited or there was a network "
        "error / NET/IB : Got completion from peer 10.0.0.8<1234> with status=12 opcode=0 len=0 "
        "vendor err 129'"
    )
    assert (quoted.category, quoted.blame, quoted.node) == ("interconnect", "infra", "gpu-07")
    cuda = explain_text(
        "gpu-07: Test CUDA failure common.cu:892 'an illegal memory access was encountered'"
    )
    assert (cuda.category, cuda.node) == ("user_code", "gpu-07")
    wrong = classify_text("#  Out of bounds values : 12 FAILED")
    assert wrong is not None and (wrong.category, wrong.blame) == (NET, BU)
    assert classify_text(" Out of bounds values : 0 OK") is None
