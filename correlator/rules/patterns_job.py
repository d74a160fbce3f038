"""Pattern rules for OOM, program, node, scheduler and NCCL-hang evidence, in this order."""

from __future__ import annotations

import re

from correlator.rules.pattern_rule import (
    _FIX,
    _STATES,
    GOOM,
    HOOM,
    NCCL,
    NODE,
    SCHED,
    USER,
    PatternRule,
    _p,
    _r,
)
from correlator.taxonomy import Blame

JOB_AND_SCHEDULER: tuple[PatternRule, ...] = (
    # --- GPU OOM before generic CUDA errors ----------------------------------------------------
    _p(
        "cuda_oom",
        r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory|CUDA_ERROR_OUT_OF_MEMORY|"
        r"cudaErrorMemoryAllocation|RESOURCE_EXHAUSTED: Out of memory|"
        r"Out of memory while trying to allocate|"
        r"failed to allocate .{0,40}(on device|from device|GPU)|CUBLAS_STATUS_ALLOC_FAILED|"
        r"Cuda failure 'out of memory'|HIP out of memory",
        GOOM,
        Blame.JOB,
        action=(
            "reduce the batch size or model shard per GPU (or enable activation checkpointing) "
            "and resubmit"
        ),
        confidence=0.9,
        summary="the job ran out of GPU memory",
        priority=55,
    ),
    # --- user code ---------------------------------------------------------------------------
    _p(
        "device_assert",
        # not "device-side assertions": PyTorch's hint printed under every CUDA error
        r"device-side assert(?:ion)? triggered|device-side assert(?!ions)|cudaErrorAssert|"
        r"CUDA_ERROR_ASSERT|Assertion `[^`]*`\s*failed",
        USER,
        Blame.JOB,
        action=_FIX + " (an index or value check failed in a GPU kernel; "
        "rerun with CUDA_LAUNCH_BLOCKING=1)",
        confidence=0.85,
        summary="a device-side assertion failed in the program",
        priority=55,
    ),
    _p(
        "illegal_access",
        r"illegal memory access|cudaErrorIllegalAddress|CUDA_ERROR_ILLEGAL_ADDRESS|"
        r"misaligned address|illegal instruction|CUDA_ERROR_ILLEGAL_INSTRUCTION",
        USER,
        Blame.JOB,
        action=_FIX + " (run it under compute-sanitizer)",
        confidence=0.75,
        summary="the program made an illegal memory access on the GPU",
        priority=50,
    ),
    _p(
        "launch_failure",
        r"unspecified launch failure|CUDA_ERROR_LAUNCH_FAILED|cudaErrorLaunchFailure|"
        r"too many resources requested for launch|invalid configuration argument|"
        r"no kernel image is available|invalid device function|CUDNN_STATUS_(EXECUTION_FAILED|"
        r"NOT_SUPPORTED|BAD_PARAM)|"
        r"CUBLAS_STATUS_(EXECUTION_FAILED|NOT_SUPPORTED|INVALID_VALUE)",
        USER,
        Blame.JOB,
        action=_FIX + " (check the kernel launch and the CUDA/driver build)",
        confidence=0.6,
        summary="a CUDA kernel launch failed",
        priority=45,
    ),
    # --- host OOM ----------------------------------------------------------------------------
    # mm/oom_kill.c from 2.6.36 to 4.x printed the kill on a line of its own, after "Out of
    # memory: Kill process ... or sacrifice child": pr_err("Killed process %d (%s)
    # total-vm:%lukB, anon-rss:%lukB, file-rss:%lukB\n", ...) (shmem-rss added in 4.6)
    # Ray lists the OOM killer among its guesses when a worker or raylet dies ("(1) The
    # process is killed by SIGKILL by OOM killer due to high memory usage. (2) ray stop
    # --force is called." and "(1) SIGKILL by the user or system OOM killer, (2) Invalid
    # memory access", ray.json's sources): a guess, not a kill, also when a terminal's wrap
    # cuts the list off from Ray's own line
    # RMM's device-memory exceptions are std::bad_alloc by type and MemoryError in Python
    # ('std::bad_alloc: out_of_memory: RMM failure at: ...', rapidsai/rmm error.hpp): GPU
    # memory, read by rmm.json, not the host's
    _p(
        "host_oom",
        r"(?<!SIGKILL by )(?<!user or system )"
        r"oom[-_ ]kill(?!er due to high memory usage|er, \(2\) Invalid memory access)|"
        r"Out of memory: Kill|invoked oom-killer|Memory cgroup out of memory|"
        r"\bKilled process \d+ \([^)\n]*\) total-vm:\d+kB|"
        r"OOMKilled|"
        r"OUT_OF_MEMORY|exceeded (its |the )?memory limit|low on resource: memory|"
        r"The node was low on resource|"
        r"\bMemoryError\b"
        r"(?!: std::bad_alloc: (?:out_of_memory: )?(?:RMM failure at|CUDA error at))|"
        r"Cannot allocate memory|can't allocate memory|"
        r"std::bad_alloc(?!: (?:out_of_memory: )?(?:RMM failure at|CUDA error at))",
        HOOM,
        Blame.JOB,
        action=(
            "request more host memory for the job (or reduce dataloader workers/prefetch) and "
            "resubmit"
        ),
        confidence=0.85,
        summary="the job ran out of host memory and was killed",
        priority=60,
    ),
    # --- node --------------------------------------------------------------------------------
    _p(
        "kill_task_failed",
        r"Kill task failed|DUE TO JOB NOT ENDING WITH SIGNALS",
        NODE,
        Blame.NODE,
        action=(
            "the node could not kill the job's processes (often stuck in the GPU driver): "
            "drain and reboot it"
        ),
        confidence=0.85,
        summary="Slurm could not kill the job's tasks on the node",
        priority=85,
    ),
    _p(
        "node_fail",
        r"\bNODE_FAIL\b|DUE TO NODE FAIL|node fail(ure|ed)|\bNot responding\b|NodeNotReady|"
        r"\bNotReady\b|unexpectedly rebooted|Node unexpectedly rebooted|Kernel panic|kernel BUG at|"
        r"hard LOCKUP|soft lockup|NodeHasDiskPressure|Unable to contact slurm controller|"
        r"Node is shutting down|node was shut ?down|Kubelet stopped posting node status|"
        r"NodeStatusUnknown|node\.kubernetes\.io/unreachable|\bNOT_RESPONDING\b|\bBOOT_FAIL\b",
        NODE,
        Blame.NODE,
        action="drain the node, check its kernel log and hardware, and resubmit the job elsewhere",
        confidence=0.85,
        summary="the node failed or stopped responding",
        priority=85,
    ),
    _p(
        "node_io",
        r"No space left on device|Read-only file system|Stale file handle|"
        r"blocked for more than \d+ seconds",
        NODE,
        Blame.NODE,
        action="check the node's disks and file systems; drain it if they are failing",
        confidence=0.5,
        summary="the node's storage or kernel misbehaved",
        priority=40,
    ),
    # --- scheduler ---------------------------------------------------------------------------
    _p(
        "time_limit",
        r"DUE TO TIME LIMIT|\bState=TIMEOUT\b|\bTIMEOUT\b|DeadlineExceeded|"
        r"Job was active longer than specified deadline",
        SCHED,
        Blame.JOB,
        action="resubmit from the last checkpoint with a longer time limit",
        confidence=0.9,
        summary="the job hit its time limit",
        priority=30,
        kinds=_STATES,
    ),
    _p(
        "time_limit_text",
        r"DUE TO TIME LIMIT|Job was active longer than specified deadline",
        SCHED,
        Blame.JOB,
        action="resubmit from the last checkpoint with a longer time limit",
        confidence=0.9,
        summary="the job hit its time limit",
        priority=30,
    ),
    _p(
        "preempted",
        r"DUE TO PREEMPTION|\bPREEMPTED\b|Preempted|preempting|PreemptionByScheduler",
        SCHED,
        Blame.INFRA,
        action="requeue the job from its last checkpoint",
        confidence=0.85,
        summary="the scheduler preempted the job",
        priority=30,
    ),
    _p(
        "unschedulable",
        r"FailedScheduling|PodUnschedulable|\bUnschedulable\b(?!:\s*(?:false|true))|"
        r"Insufficient nvidia\.com/gpu|"
        r"didn't match Pod's node affinity|had untolerated taint",
        SCHED,
        Blame.INFRA,
        action="free or add GPU capacity, or fix the job's resource request/node selector",
        confidence=0.75,
        summary="the scheduler could not place the job",
        priority=25,
    ),
    # Slurm's ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE (slurm_errno.c: "Requested node
    # configuration is not available") is what a request that can never be met gets: in
    # SchedMD/slurm src/stepmgr/stepmgr.c _pick_step_nodes() a step's node list outside its job's
    # allocation, an invalid list or more nodes than the step may have fall through to it, while
    # resources merely in use now return ESLURM_NODES_BUSY and wait. The job asked for what it
    # cannot get, so it is the job's own request, not a full cluster (issue #11 round 46, 1006).
    _p(
        "slurm_request_unsatisfiable",
        r"Requested node configuration is not available",
        SCHED,
        Blame.JOB,
        action="fix the job's or step's request (node list, node, CPU or memory counts, "
        "features) to what its allocation or partition can give",
        confidence=0.75,
        summary="Slurm can never satisfy the job's or step's request as asked",
        priority=25,
    ),
    _p(
        "cancelled",
        # not XLA's healthy startup line "Polling for error ... will return only if an error is
        # encountered or cancelled (e.g. due to shutdown)" (coordination_service_agent.cc)
        r"(?<!encountered or )\bCANCELLED\b|\bCANCELED\b",
        SCHED,
        Blame.JOB,
        action="nothing to repair: the job was cancelled by its owner or an administrator",
        confidence=0.6,
        summary="the job was cancelled",
        priority=15,
    ),
    _p(
        "job_failed_state",
        r"\bState=FAILED\b",
        USER,
        Blame.JOB,
        action="read the job's own output: it exited non-zero and the scheduler saw no other cause",
        confidence=0.35,
        summary="the job exited with a non-zero code",
        priority=12,
        kinds=_STATES,
    ),
    # --- NCCL hangs (consequences) -----------------------------------------------------------
    _p(
        "nccl_watchdog",
        r"Watchdog caught collective operation timeout|collective operation timeout|"
        r"ProcessGroupNCCL.{0,80}(timeout|timed out)|Some NCCL operations have failed or timed out|"
        r"NCCL watchdog|NCCL communicator was aborted|ncclCommWatchdog|Timeout at NCCL work",
        NCCL,
        Blame.UNKNOWN,
        action="find the rank that stopped first (hardware/network events on its node, "
        "lagging SeqNum); resubmit from checkpoint",
        confidence=0.5,
        summary="a NCCL collective timed out (symptom; root cause not shown)",
        root_cause=False,
        priority=10,
        culprit="none",  # every rank prints the timeout: the printer is no suspect
    ),
    # --- generic application errors (weakest) ------------------------------------------------
    _p(
        "python_error",
        _r(
            r"^\s*(\w+\.)*(RuntimeError|ValueError|KeyError|TypeError|AssertionError|IndexError|"
            r"AttributeError|NameError|ModuleNotFoundError|ImportError|FileNotFoundError|"
            r"ZeroDivisionError|"
            r"NotImplementedError|SyntaxError|PermissionError)\b",
            re.I | re.M,
        ),
        USER,
        Blame.JOB,
        action=_FIX,
        confidence=0.45,
        summary="the program raised an exception",
        priority=20,
        needles=("error",),  # every alternative ends in "Error"
    ),
    # not Ray's guesses ("(3) The worker is crashed unexpectedly due to SIGSEGV or other
    # unexpected errors.", "(2) Invalid memory access from Raylet causing SIGSEGV or SIGBUS"),
    # cut off from Ray's own line by a terminal's wrap (see host_oom)
    _p(
        "segfault",
        r"Segmentation fault|"
        r"(?<!crashed unexpectedly due to )(?<!from Raylet causing )"
        r"SIGSEGV(?! or other unexpected errors| or SIGBUS)|core dumped",
        USER,
        Blame.JOB,
        action=_FIX + " (if it recurs only on one node, suspect the node)",
        confidence=0.4,
        summary="the program crashed with a segmentation fault",
        priority=20,
    ),
)
