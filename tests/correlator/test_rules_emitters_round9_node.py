"""Round nine, continued: CUDA as PyTorch and TensorFlow printed it, the launchers, nvidia-smi,
Slurm, the kubelet, the kernel and MPICH's Hydra, each at its 2019-2024 releases and the newest,
with made-up values; each family's `sources` cite the release of each wording."""

from __future__ import annotations

import pytest

from correlator.explain import explain_text


def verdict(text: str) -> tuple[str | None, str, str | None]:
    got = explain_text(text)
    return got.category, got.blame, got.node


THC = "/pytorch/aten/src/THC"
# (wording, category, blame) by the CUDA docs' meaning of the error (corpus README policy)
CUDA_TORCH = [
    # torch <= 1.4, THC: 'cuda runtime error (N) : <cudaGetErrorString> at file:line'
    (
        f"RuntimeError: cuda runtime error (2) : out of memory at {THC}/generic/THCStorage.cu:58",
        "oom_gpu",
        "job",
    ),
    (
        f"RuntimeError: cuda runtime error (59) : device-side assert triggered at {THC}/generic/"
        "THCTensorMath.cu:26",
        "user_code",
        "job",
    ),
    (
        f"RuntimeError: cuda runtime error (77) : an illegal memory access was encountered at "
        f"{THC}/THCCachingHostAllocator.cpp:278",
        "user_code",
        "job",
    ),
    (
        f"RuntimeError: cuda runtime error (39) : uncorrectable ECC error encountered at "
        f"{THC}/THCGeneral.cpp:405",
        "gpu_hardware",
        "node",
    ),
    (
        f"RuntimeError: cuda runtime error (46) : all CUDA-capable devices are busy or unavailable "
        f"at {THC}/THCGeneral.cpp:74",
        "node",
        "node",
    ),
    # THCudaCheck's warning form: 'THCudaCheck FAIL file=%s line=%i error=%i : %s'
    (
        f"THCudaCheck FAIL file={THC}/THCCachingHostAllocator.cpp line=278 error=59 : "
        "device-side assert triggered",
        "user_code",
        "job",
    ),
    (
        f"THCudaCheck FAIL file={THC}/generic/THCStorage.cu line=58 error=2 : out of memory",
        "oom_gpu",
        "job",
    ),
    # torch 1.5+: C10_CUDA_CHECK's 'CUDA error: <string>'
    ("RuntimeError: CUDA error: unspecified launch failure", "user_code", "job"),
    (
        "RuntimeError: CUDA error: an illegal memory access was encountered\nCUDA kernel errors "
        "might be asynchronously reported at some other API call, so the stacktrace below might "
        "be incorrect.",
        "user_code",
        "job",
    ),
    ("RuntimeError: CUDA error: uncorrectable ECC error encountered", "gpu_hardware", "node"),
    # cuDNN and cuBLAS as ATen prints them
    ("RuntimeError: cuDNN error: CUDNN_STATUS_EXECUTION_FAILED", "user_code", "job"),
    ("RuntimeError: cuDNN error: CUDNN_STATUS_INTERNAL_ERROR", "user_code", "job"),
    (
        "RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasSgemm( "
        "handle, opa, opb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc)`",
        "user_code",
        "job",
    ),
    (
        "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
        "oom_gpu",
        "job",
    ),
    # the caching allocator, 1.x and 2.1's wording (with its 'capacty' typo)
    (
        "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 10.76 GiB total "
        "capacity; 9.80 GiB already allocated; 3.12 MiB free; 9.90 GiB reserved in total by "
        "PyTorch)",
        "oom_gpu",
        "job",
    ),
    (
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
        "total capacty of 79.15 GiB of which 1.02 GiB is free.",
        "oom_gpu",
        "job",
    ),
]


@pytest.mark.parametrize(("text", "category", "blame"), CUDA_TORCH)
def test_a_cuda_error_as_any_torch_release_printed_it_follows_the_cuda_docs(
    text: str, category: str, blame: str
) -> None:
    assert verdict(text)[:2] == (category, blame)


SE = "tensorflow/stream_executor/cuda"
CUDA_TF = [
    # TF 1.x/2.x stream_executor: 'CUDA_ERROR_<NAME>: <string>' from the driver API
    (
        f"E {SE}/cuda_driver.cc:1010] failed to synchronize the stop event: "
        "CUDA_ERROR_LAUNCH_FAILED: unspecified launch failure",
        "user_code",
        "job",
    ),
    (
        f"E {SE}/cuda_event.cc:29] Error polling for event status: failed to query event: "
        "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered",
        "user_code",
        "job",
    ),
    (
        f"E {SE}/cuda_driver.cc:806] failed to allocate 2.00G (2147483648 bytes) from device: "
        "CUDA_ERROR_OUT_OF_MEMORY: out of memory",
        "oom_gpu",
        "job",
    ),
    (
        "tensorflow.python.framework.errors_impl.InternalError: CUDA runtime implicit "
        "initialization on GPU:0 failed. Status: out of memory",
        "oom_gpu",
        "job",
    ),
    (
        f"E {SE}/cuda_dnn.cc:329] Could not create cudnn handle: CUDNN_STATUS_INTERNAL_ERROR",
        "user_code",
        "job",
    ),
    (
        f"E {SE}/cuda_driver.cc:318] failed call to cuInit: CUDA_ERROR_UNKNOWN: unknown error",
        "gpu_hardware",
        "node",
    ),
    (
        "E external/local_xla/xla/stream_executor/cuda/cuda_driver.cc:274] failed call to cuInit: "
        "CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected",
        "node",
        "node",
    ),
]


@pytest.mark.parametrize(("text", "category", "blame"), CUDA_TF)
def test_a_cuda_error_as_tensorflow_printed_it_follows_the_cuda_docs(
    text: str, category: str, blame: str
) -> None:
    assert verdict(text)[:2] == (category, blame)


CMD = "['/usr/bin/python', '-u', 'train.py', '--local_rank=1']"
LAUNCHERS = [
    # torch.distributed.launch before elastic (<= 1.8), accelerate, DeepSpeed < 0.5: the
    # CalledProcessError's str(); Python 3.6+ names the signal, older ones print the number
    (
        f"subprocess.CalledProcessError: Command '{CMD}' died with <Signals.SIGKILL: 9>.",
        "oom_host",
        "unknown",
    ),
    (
        f"subprocess.CalledProcessError: Command '{CMD}' returned non-zero exit status -9.",
        "oom_host",
        "unknown",
    ),
    (
        f"subprocess.CalledProcessError: Command '{CMD}' died with <Signals.SIGSEGV: 11>.",
        "user_code",
        "job",
    ),
    (
        f"subprocess.CalledProcessError: Command '{CMD}' returned non-zero exit status 1.",
        "user_code",
        "job",
    ),
    # DeepSpeed launcher/launch.py sigkill_handler
    (
        f"[ERROR] [launch.py:321:sigkill_handler] {CMD} exits with return code = -9",
        "oom_host",
        "unknown",
    ),
    # torch 1.9's first elastic error block (msg: field, no host)
    (
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
        "***************************************\n            train.py FAILED\n"
        "=======================================\nRoot Cause:\n[0]:\n  time: 2021-08-18_09:48:58\n"
        "  rank: 1 (local_rank: 1)\n  exitcode: -9 (pid: 4411)\n  error_file: <N/A>\n"
        '  msg: "Signal 9 (SIGKILL) received by PID 4411"\n'
        "=======================================\nOther Failures:\n  <NO_OTHER_FAILURES>\n"
        "***************************************",
        "oom_host",
        "unknown",
    ),
]


@pytest.mark.parametrize(("text", "category", "blame"), LAUNCHERS)
def test_a_launchers_exit_report_in_every_release_follows_the_signal_rules(
    text: str, category: str, blame: str
) -> None:
    assert verdict(text)[:2] == (category, blame)


def test_a_deepspeed_rank_killed_on_a_pdsh_host_names_that_host() -> None:
    # the multinode runner's pdsh prefixes every remote line with "host: " (a prefix is read
    # as a host only when it recurs)
    text = (
        "gpu-b-07: [2023-04-01 10:11:10,001] [INFO] [launch.py:162:main] dist_world_size=16\n"
        "gpu-b-07: [2023-04-01 10:11:12,345] [ERROR] [launch.py:434:sigkill_handler] "
        f"{CMD} exits with return code = -9"
    )
    assert verdict(text) == ("oom_host", "unknown", "gpu-b-07")


PROMPT = "[root@gpu-a-03 ~]# nvidia-smi\n"
SMI = [
    (
        "Unable to determine the device handle for GPU 0000:3B:00.0: GPU is lost.  Reboot the "
        "system to recover this GPU",
        "gpu_hardware",
    ),
    ("Unable to determine the device handle for GPU 0000:3B:00.0: Unknown Error", "gpu_hardware"),
    (
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure "
        "that the latest NVIDIA driver is installed and running.",
        "node",
    ),
    # newer drivers add the library's version on the next line
    (
        "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 535.161",
        "node",
    ),
]


@pytest.mark.parametrize(("text", "category"), SMI)
def test_nvidia_smi_that_cannot_reach_a_gpu_blames_the_node(text: str, category: str) -> None:
    assert verdict(PROMPT + text) == (category, "node", "gpu-a-03")


STEPD = "slurmstepd: error: "
SLURM = [
    # src/plugins/task/cgroup/task_cgroup_memory.c, 17.11
    (STEPD + "Exceeded step memory limit at some point.", "oom_host", "job"),
    (STEPD + "Exceeded job memory limit at some point.", "oom_host", "job"),
    # 19.05 ('in step %s cgroup'), 20.11 ('in %ps cgroup'), 21.08 ('in %ps.'), 23.02+
    (
        STEPD + "Detected 1 oom-kill event(s) in step 4242.batch cgroup. Some of your processes "
        "may have been killed by the cgroup out-of-memory handler.",
        "oom_host",
        "job",
    ),
    (
        STEPD + "Detected 3 oom-kill event(s) in StepId=4242.0 cgroup. Some of your processes "
        "may have been killed by the cgroup out-of-memory handler.",
        "oom_host",
        "job",
    ),
    (
        STEPD + "Detected 1 oom-kill event(s) in StepId=4242.batch. Some of your processes may "
        "have been killed by the cgroup out-of-memory handler.",
        "oom_host",
        "job",
    ),
    (
        STEPD + "Detected 2 oom_kill events in StepId=4242.0. Some of the step tasks have been "
        "OOM Killed.",
        "oom_host",
        "job",
    ),
    ("slurmstepd: task/cgroup: oom-kill event count: 1", "oom_host", "job"),
    # slurmstepd/req.c, 17.11 .. 24.05
    (
        STEPD + "*** JOB 4242 ON gpu-a-03 CANCELLED AT 2021-03-02T10:11:12 DUE TO TIME LIMIT ***",
        "scheduler",
        "job",
    ),
    (
        STEPD + "*** STEP 4242.0 ON gpu-a-03 CANCELLED AT 2021-03-02T10:11:12 DUE TO TIME LIMIT "
        "***",
        "scheduler",
        "job",
    ),
    (
        STEPD + "*** JOB 4242 ON gpu-a-03 CANCELLED AT 2021-03-02T10:11:12 DUE TO PREEMPTION ***",
        "scheduler",
        "infra",
    ),
    (STEPD + "*** JOB 4242 ON gpu-a-03 CANCELLED AT 2021-03-02T10:11:12 ***", "scheduler", "job"),
]


@pytest.mark.parametrize(("text", "category", "blame"), SLURM)
def test_slurmstepd_in_every_release_reads_by_its_meaning(
    text: str, category: str, blame: str
) -> None:
    assert verdict(text)[:2] == (category, blame)


def test_srun_waiting_for_an_aborted_step_is_no_cause_of_its_own() -> None:
    text = (
        "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.\n"
        + STEPD
        + "*** JOB 4242 ON gpu-a-03 CANCELLED AT 2021-03-02T10:11:12 DUE TO TIME LIMIT ***"
    )
    assert verdict(text)[:2] == ("scheduler", "job")


KUBELET = [
    # pkg/kubelet/eviction/helpers.go: 1.6-1.8, 1.9-1.27, 1.28+ (threshold and 'request is')
    ("Pod The node was low on resource: [MemoryPressure].", "oom_host", "job"),
    (
        "The node was low on resource: memory. Container trainer was using 31457280Ki, which "
        "exceeds its request of 0.",
        "oom_host",
        "job",
    ),
    (
        "The node was low on resource: memory. Threshold quantity: 100Mi, available: 51200Ki. "
        "Container trainer was using 31457280Ki, request is 0, has larger consumption of memory.",
        "oom_host",
        "job",
    ),
    (
        "The node was low on resource: ephemeral-storage. Threshold quantity: 10Gi, available: "
        "9Gi. Container trainer was using 20Gi, request is 0, has larger consumption of "
        "ephemeral-storage.",
        "node",
        "node",
    ),
    ("Pod The node was low on resource: [DiskPressure].", "node", "node"),
]


@pytest.mark.parametrize(("text", "category", "blame"), KUBELET)
def test_a_kubelet_eviction_in_every_release_reads_by_its_resource(
    text: str, category: str, blame: str
) -> None:
    assert verdict(text)[:2] == (category, blame)


KERNEL_OOM = [
    # mm/oom_kill.c before 4.19 ('Kill process ... or sacrifice child') and since
    "Mar  2 10:11:12 gpu-a-03 kernel: Out of memory: Kill process 4411 (python) score 912 or "
    "sacrifice child",
    "Mar  2 10:11:12 gpu-a-03 kernel: Memory cgroup out of memory: Kill process 4411 (python) "
    "score 1000 or sacrifice child",
    "Mar  2 10:11:12 gpu-a-03 kernel: Out of memory: Killed process 4411 (python) "
    "total-vm:81234567kB, anon-rss:61234567kB, file-rss:0kB, shmem-rss:0kB, UID:1000 "
    "pgtables:123456kB oom_score_adj:0",
]


@pytest.mark.parametrize("line", KERNEL_OOM)
def test_a_kernel_oom_kill_in_every_release_is_the_jobs_on_that_host(line: str) -> None:
    assert verdict(line) == ("oom_host", "job", "gpu-a-03")


HYDRA = (
    "==================================================================================="
    "\n=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n=   PID 4411 RUNNING AT "
    "gpu-b-07\n=   EXIT CODE: {}\n=   CLEANING UP REMAINING PROCESSES\n=   YOU CAN IGNORE "
    "THE BELOW CLEANUP MESSAGES"
)


@pytest.mark.parametrize(
    ("code", "category", "blame"),
    [
        (9, "oom_host", "unknown"),  # SIGKILL
        (11, "user_code", "job"),  # SIGSEGV
        (139, "user_code", "job"),  # SIGSEGV, core dumped
        (134, "user_code", "job"),  # SIGABRT, core dumped
    ],
)
def test_hydras_exit_code_is_the_wait_status_of_a_signalled_rank(
    code: int, category: str, blame: str
) -> None:
    # MPICH 3.1-4.3 pmiserv_cb.c prints the block only for a rank that did not exit normally
    assert verdict(HYDRA.format(code)) == (category, blame, "gpu-b-07")
