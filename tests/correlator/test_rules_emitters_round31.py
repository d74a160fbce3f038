"""Round thirty-one: four emitters' formats, as their sources print them.

- Dask's nanny (dask/distributed distributed/worker_memory.py; nanny.py in earlier releases)
  logs "Worker tcp://host:port (pid=N) exceeded 95% memory budget. Restarting..." (earlier
  "Worker exceeded 95% memory budget. Restarting") when a worker passes the terminate fraction
  of its memory limit: oom_host/job, the worker's host named when the line gives it. See
  dask.json (dask_nanny_memory_budget_restart).
- RMM (rapidsai/rmm include/rmm/detail/error.hpp, mr/device/pool_memory_resource.hpp) throws
  out_of_memory, a std::bad_alloc by type: "std::bad_alloc: out_of_memory: RMM failure at:
  file:line: Maximum pool size exceeded" (MemoryError in Python), or "... CUDA error at:
  file:line: cudaErrorMemoryAllocation out of memory": GPU memory, oom_gpu/job. See rmm.json.
- Hydra's proxy (pmodels/mpich src/pm/hydra/utils/launch/launch.c) prints "execvp error on file
  %s (%s)" when the job's program cannot be executed: user_code/job. See mpi.json
  (hydra_execvp_error).
- slurmd's NVML autodetection (SchedMD/slurm src/plugins/gpu/nvml/gpu_nvml.c) exits with
  "fatal: MIG mode is enabled, but no MIG devices were found. ...": node/node. See slurm.json
  (slurmd_nvml_mig_without_instances).
Never a corpus case."""

from __future__ import annotations

import pytest

from correlator.explain import explain_text

_NANNY_NEW = (
    "2024-05-02 10:11:12,345 - distributed.nanny.memory - WARNING - Worker "
    "tcp://10.1.2.3:40215 (pid=4242) exceeded 95% memory budget. Restarting...\n"
    "2024-05-02 10:11:12,512 - distributed.nanny - WARNING - Restarting worker\n"
)
_NANNY_OLD = (
    "distributed.nanny - WARNING - Worker exceeded 95% memory budget. Restarting\n"
    "distributed.nanny - WARNING - Worker process 1234 was killed by signal 15\n"
    "distributed.nanny - WARNING - Restarting worker\n"
)


def test_the_nannys_memory_restart_naming_its_worker_reads_host_oom_on_that_host() -> None:
    got = explain_text(_NANNY_NEW)
    assert (got.category, got.blame, got.node) == ("oom_host", "job", "10.1.2.3")


def test_the_older_nanny_line_without_an_address_names_no_node() -> None:
    got = explain_text(_NANNY_OLD)
    assert (got.category, got.blame, got.node) == ("oom_host", "job", None)


@pytest.mark.parametrize(
    "line",
    (
        "MemoryError: std::bad_alloc: out_of_memory: RMM failure at:"
        "/opt/conda/include/rmm/mr/device/pool_memory_resource.hpp:254: "
        "Maximum pool size exceeded",
        "RuntimeError: std::bad_alloc: RMM failure at:"
        "/conda/include/rmm/mr/device/pool_memory_resource.hpp:167: Maximum pool size exceeded",
        "MemoryError: std::bad_alloc: out_of_memory: CUDA error at: "
        "/opt/conda/include/rmm/mr/device/cuda_memory_resource.hpp:70: "
        "cudaErrorMemoryAllocation out of memory",
    ),
)
def test_rmms_device_out_of_memory_reads_gpu_memory_not_host(line: str) -> None:
    got = explain_text(line + "\n")
    assert (got.category, got.blame) == ("oom_gpu", "job")


@pytest.mark.parametrize(
    "line",
    (
        "terminate called after throwing an instance of 'std::bad_alloc'\n"
        "  what():  std::bad_alloc",
        "MemoryError: Unable to allocate 7.45 GiB for an array with shape (1000000000,)",
    ),
)
def test_a_plain_bad_alloc_or_memoryerror_still_reads_host_memory(line: str) -> None:
    got = explain_text(line + "\n")
    assert (got.category, got.blame) == ("oom_host", "job")


def test_hydras_execvp_error_blames_the_jobs_command_not_the_proxys_host() -> None:
    text = (
        "[proxy:0:1@gpu-node-07] HYDU_create_process (utils/launch/launch.c:75): "
        "execvp error on file ./a.out (No such file or directory)\n"
    )
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("user_code", "job", None)


def test_slurmd_exiting_on_mig_mode_without_instances_reads_node() -> None:
    text = (
        "slurmd: fatal: MIG mode is enabled, but no MIG devices were found. Please either "
        "create MIG instances, disable MIG mode, remove AutoDetect=nvml, or remove GPUs from "
        "the configuration completely.\n"
    )
    got = explain_text(text)
    assert (got.category, got.blame) == ("node", "node")
