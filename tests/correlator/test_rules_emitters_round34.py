"""Round thirty-four: one emitter's format, as its source prints it.

- Ray's ActorDiedError (python/ray/exceptions.py) prints the actor's death cause (for a dead
  worker, GenWorkerDiedCause's 'The actor is dead because its worker process has died. Worker
  exit type: ... Worker exit detail: ...') and, when the actor had never started, the line 'The
  actor never ran - it was cancelled before it started running.': Ray dropped the start of an
  actor that died, no user or scheduler cancelled the job, so the death cause decides. See
  ray.json (ray_actor_never_started), read before the generic cancel pattern
  (correlator/rules/patterns_job.py, 'cancelled') as every emitter rule is.
Never a corpus case."""

from __future__ import annotations

from correlator.explain import explain_text

_NEVER_STARTED = "The actor never ran - it was cancelled before it started running.\n"
_DEAD_WORKER = (
    "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n"
    "\tclass_name: RolloutWorker\n"
    "\tactor_id: 3f0c1b9a7d2e4c5b6a7f8e9d01000000\n"
    "\tip: 172.31.4.17\n"
    "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR "
    "Worker exit detail: Worker unexpectedly exits with a connection error code 2. End of file. "
    "There are some potential root causes. (1) The process is killed by SIGKILL by OOM killer "
    "due to high memory usage. (2) ray stop --force is called. (3) The worker is crashed "
    "unexpectedly due to SIGSEGV or other unexpected errors.\n"
)


def test_an_actor_that_never_started_after_its_worker_died_reads_as_the_dead_worker() -> None:
    got = explain_text(_DEAD_WORKER + _NEVER_STARTED)
    assert (got.category, got.blame) == ("oom_host", "unknown")


def test_the_never_started_line_alone_is_no_job_cancel() -> None:
    got = explain_text(_NEVER_STARTED)
    assert got.category != "scheduler"


def test_a_slurm_cancel_still_reads_as_the_jobs_cancel() -> None:
    got = explain_text(
        "slurmstepd: error: *** JOB 4242 ON gpu-a07 CANCELLED AT 2025-03-01T10:00:00 ***\n"
    )
    assert (got.category, got.blame, got.node) == ("scheduler", "job", "gpu-a07")
