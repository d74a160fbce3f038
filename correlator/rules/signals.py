"""What an exit status or a signal says about a failed process, and how sure that makes us.

A launcher (torchrun, DeepSpeed, accelerate, srun, a shell, a container runtime) reports how a
process ended in one of a few forms: a negative return code (Python's subprocess: -9), a shell or
container status of 128 + N (137), a signal name ("Killed", "SIGKILL", "Segmentation fault") or
a plain exit status (1, 127); a launcher that exits with its child's negative code (DeepSpeed's
launch.py: sys.exit(-9)) leaves 256 - N, which a relay of it (pdsh) reports. Meanings follow
signal(7) and the shells' 128 + N convention:

- SIGKILL (9): nothing in the process asked for it; on a training node the usual sender is the
  kernel OOM killer (host memory), less often the scheduler or an operator. With no other
  evidence: oom_host, blame unknown, low confidence, and the explanation says why.
- SIGSEGV (11), SIGABRT (6), SIGFPE (8), SIGILL (4): the program crashed: user_code / job.
- SIGBUS (7): in PyTorch jobs almost always a too-small /dev/shm (shared memory): oom_host,
  blame unknown.
- SIGTERM (15), SIGINT (2), SIGHUP (1): the process was asked to stop (launcher tearing down
  after another rank failed, scheduler time limit, Ctrl-C): a consequence, no category.
- exit 126 / 127: command not executable / not found: user_code / job.
- any other non-zero exit: the program reported an error itself: user_code / job, low
  confidence. Exit 0 is not a failure.

Every verdict here is a weak, symptom-level sign (root_cause False, low priority): any other
recognised error in the same text outranks it.

A launcher ends the surviving ranks itself once one rank fails, with SIGKILL at last:

- MPICH's MPD (pmodels/mpich src/pm/mpd/mpdman.py @ f6a728b): every manager that receives the
  ring's 'collective_abort' kills its client's process group with SIGKILL, and reports 137
  (signal 9) for a client whose PMI socket closed before it was reaped ("assume kill -9");
- MPICH Hydra (pmodels/mpich src/pm/hydra/proxy/pmip_cb.c @ 7ebf82d): when one process's PMI
  socket closes, the proxy with auto-cleanup (the default) runs
  HYD_pmcd_pmip_send_signal(SIGKILL), "kill all processes";
- Open MPI / PRRTE (open-mpi/ompi orte/mca/odls/base/odls_base_default_fns.c and PRRTE's
  src/mca/odls/base/odls_base_default_fns.c, kill_local_procs): SIGCONT, then SIGTERM, then
  SIGKILL, each odls_base_sigkill_timeout apart;
- torchrun's elastic agent (pytorch/pytorch torch/distributed/elastic/multiprocessing/api.py
  _close): the death signal (SIGTERM), then after its timeout "Unable to shutdown process %s
  via %s, forcefully exiting via %s" with SIGKILL;
- srun --kill-on-bad-exit (SchedMD/slurm src/srun/launch.c @ 284c3b9: _step_signal(
  SIG_TERM_KILL) on the first abnormal task exit; man srun -K): the step's other tasks are
  terminated, and srun reports each as "host: task N: Killed" (strsignal of its WTERMSIG).

So when the same text shows a rank that crashed on its own (SIGSEGV, SIGFPE, SIGILL, SIGBUS)
and ranks ended by a bare SIGKILL, the SIGKILL is that teardown, not a second cause
(after_crash); a kill the text itself ties to the OOM killer is read by its own rule, not here.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Sequence
from dataclasses import replace

from correlator.taxonomy import Blame, Category, Verdict

SIGNAL_NAMES = {
    1: "SIGHUP",
    2: "SIGINT",
    4: "SIGILL",
    6: "SIGABRT",
    7: "SIGBUS",
    8: "SIGFPE",
    9: "SIGKILL",
    11: "SIGSEGV",
    13: "SIGPIPE",
    15: "SIGTERM",
}
# Words launchers print for a signal (strsignal(3), Python's Signals enum, PyTorch messages).
_WORDS = {
    "killed": 9,
    "sigkill": 9,
    "segmentation fault": 11,
    "sigsegv": 11,
    "aborted": 6,
    "sigabrt": 6,
    "bus error": 7,
    "sigbus": 7,
    "terminated": 15,
    "sigterm": 15,
    "interrupt": 2,
    "sigint": 2,
    "floating point exception": 8,
    "sigfpe": 8,
    "illegal instruction": 4,
    "sigill": 4,
    "hangup": 1,
    "sighup": 1,
}
_CRASH = {11, 6, 8, 4}
_MAX_SIGNAL = 31  # the standard signals; 256 - N above that would be real-time signals
_STOP = {15, 2, 1, 13}
_KILLED = Category.OOM_HOST  # the reading of a SIGKILL alone (signal_verdict)
# Signals a process gets from its own fault, never from a launcher's teardown. SIGABRT is left
# out: ProcessGroupNCCL's watchdog ends a rank whose collective timed out with std::abort(), so
# an -6 beside a SIGKILL may be the survivors of a rank the OOM killer took.
SELF_CRASH = frozenset({4, 7, 8, 11})


def signal_of_word(word: str) -> int | None:
    """The signal number a launcher's word for it names ("Killed", "SIGSEGV"), if any."""
    word = word.strip()
    if word.lower() in _WORDS:
        return _WORDS[word.lower()]
    # any other C name a launcher prints (Python's Signals.name: SIGQUIT, SIGUSR1), Linux numbers
    member = signal.Signals.__members__.get(word.upper())
    return int(member) if member is not None else None


def decode(
    code: int | None, *, shell: bool = False, mod256: bool = False
) -> tuple[int | None, int | None]:
    """(signal, exit status) from a reported code: negative codes; for shells 128+N; for a
    launcher that exits with its child's negative code (sys.exit(-N) leaves 256 - N) 256-N."""
    if code is None:
        return None, None
    if code < 0:
        return -code, None
    if shell and 128 < code < 160:
        return code - 128, None
    # 255 stays a status: ssh's own failure, and exit(-1) is no signal
    if mod256 and 256 - _MAX_SIGNAL <= code < 255:
        return 256 - code, None
    return None, code


def _v(
    cat: Category | None,
    blame: Blame,
    conf: float,
    summary: str,
    action: str,
    sig: int | None = None,
) -> Verdict:
    return Verdict(
        category=cat,
        blame=blame,
        action=action,
        confidence=conf,
        summary=summary,
        root_cause=False,
        priority=4 if cat is None else 7,
        signal=sig,
    )


def signal_verdict(sig: int) -> Verdict:
    """What a process killed by signal `sig` (and nothing else) most likely means."""
    return replace(_alone(sig), signal=sig)


def _alone(sig: int) -> Verdict:
    name = SIGNAL_NAMES.get(sig, f"signal {sig}")
    if sig == 9:
        return _v(
            Category.OOM_HOST,
            Blame.UNKNOWN,
            0.45,
            f"a process was killed by {name} and no other error shows; SIGKILL is not sent by "
            "the program itself, and on a training node the usual sender is the kernel OOM "
            "killer, so host memory is the likely cause (the scheduler or an operator can also "
            "send it)",
            "check the node's kernel log for an OOM kill of that process; if there is one, "
            "request more host memory or lower dataloader workers, then resubmit",
        )
    if sig in _CRASH:
        return _v(
            Category.USER_CODE,
            Blame.JOB,
            0.4,
            f"a process crashed with {name}",
            "fix the program (run it under a debugger or with core dumps) and resubmit; if it "
            "recurs only on one node, suspect the node",
        )
    if sig == 7:
        return _v(
            Category.OOM_HOST,
            Blame.UNKNOWN,
            0.35,
            "a process died of SIGBUS, which in PyTorch jobs almost always means /dev/shm "
            "(shared memory) is too small for the dataloader",
            "give the job a larger /dev/shm (or fewer dataloader workers) and resubmit",
        )
    if sig in _STOP:
        return _v(
            None,
            Blame.UNKNOWN,
            0.2,
            f"a process was stopped with {name} (by its launcher, the scheduler or a user); "
            "that is a consequence, not a cause",
            "look for the first rank that failed, or for a time limit or cancel",
        )
    return _v(
        None,
        Blame.UNKNOWN,
        0.2,
        f"a process was killed by {name}",
        "read that process's own log and the node's kernel log",
    )


def exit_verdict(status: int) -> Verdict | None:
    """What a plain (non-signal) exit status means; None for 0 (success)."""
    if status == 0:
        return None
    if status in (126, 127):
        return _v(
            Category.USER_CODE,
            Blame.JOB,
            0.5,
            f"the command exited with status {status}: the program or interpreter could not "
            "be found or run",
            "fix the job's command line or environment and resubmit",
        )
    return _v(
        Category.USER_CODE,
        Blame.JOB,
        0.35,
        f"a process exited with status {status} and no other error shows; a non-zero exit "
        "is the program reporting its own failure",
        "read the failing process's own output (its traceback) and resubmit after fixing it",
    )


_NUMBER = re.compile(r"-?\d+")


def verdict_from(
    code: str | int | None = None,
    signal: str | int | None = None,
    *,
    shell: bool = False,
    mod256: bool = False,
) -> Verdict | None:
    """Verdict from the pieces a rule captured: an exit code and/or a signal (number or word)."""
    sig: int | None = None
    if isinstance(signal, int):
        sig = signal
    elif signal:
        m = _NUMBER.search(signal)
        sig = abs(int(m.group())) if m else signal_of_word(signal)
    status: int | None = None
    if sig is None and code is not None:
        m = _NUMBER.search(str(code))
        sig, status = decode(int(m.group()) if m else None, shell=shell, mod256=mod256)
    if sig is not None:
        return signal_verdict(sig)
    if status is not None:
        return exit_verdict(status)
    return None


def teardown_verdict() -> Verdict:
    """A process killed by SIGKILL beside a rank that crashed: its launcher's teardown."""
    return _v(
        None,
        Blame.UNKNOWN,
        0.2,
        "a process was killed by SIGKILL after another rank crashed: launchers (MPD, Hydra, "
        "Open MPI, torchrun, srun --kill-on-bad-exit) end the surviving ranks with SIGKILL, "
        "so that is a consequence, not a cause",
        "look at the rank that crashed",
        9,
    )


def after_crash(verdicts: Sequence[Verdict | None]) -> list[Verdict | None]:
    """The verdicts of one failure, each bare SIGKILL read as the launcher's teardown when
    another shows a rank that crashed on its own (SELF_CRASH); unchanged otherwise."""
    crashed = any(v is not None and v.signal in SELF_CRASH and v.category for v in verdicts)
    if not crashed:
        return list(verdicts)
    # only the signal reasoner's own SIGKILL verdict: a kill a rule read as the OOM killer's
    # carries no signal and stays the cause
    return [
        teardown_verdict() if v is not None and v.signal == 9 and v.category is _KILLED else v
        for v in verdicts
    ]
