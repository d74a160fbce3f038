"""A rank killed by SIGKILL beside a rank that crashed is the launcher's teardown, read alike by
`explain` and the live correlator (correlator/rules/signals.py after_crash).

The texts are built from the launchers' own formats, not copied from the corpus:

- MPICH's MPD: pmodels/mpich src/pm/mpd/mpiexec.py @ 6e1c8d1 prints 'rank %d in job %s caused
  collective abort of all ranks' and '  exit status of rank %d: killed by signal %d ' or
  '  exit status of rank %d: return code %d '; mpdman.py @ f6a728b kills every other rank's
  process group with SIGKILL once a collective abort goes round the ring;
- MPICH Hydra: the BAD TERMINATION block ('=   RANK %d PID %d RUNNING AT %s',
  '=   KILLED BY SIGNAL: %d (%s)'); its proxy kills the rest with SIGKILL (pmip_cb.c);
- srun: src/srun/launch.c 'error("%s: %s %s: %s%s", hosts, task_str, tasks, signal_str,
  core_str)' with strsignal(3)'s words; --kill-on-bad-exit signals the step (SIG_TERM_KILL).
"""

from __future__ import annotations

from sqlalchemy.orm import Session, sessionmaker

from collector.parse.joblog import parse_job_text
from correlator import service as incidents
from correlator.explain import explain_bytes
from correlator.rules import classify_text
from correlator.rules.signals import after_crash, signal_verdict
from tests.correlator.correlator_fleet import Fleet

MPD_RANK = "rank {r} in job 12  login1_51234   caused collective abort of all ranks"
MPD_SIGNAL = "  exit status of rank {r}: killed by signal {s} "
MPD_CODE = "  exit status of rank {r}: return code {c} "
HYDRA = (
    "===================================================================================\n"
    "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n"
    "=   RANK {r} PID {pid} RUNNING AT {host}\n"
    "=   KILLED BY SIGNAL: {s} ({word})\n"
    "===================================================================================\n"
)
SRUN = "srun: error: {host}: task {t}: {word}"


def _mpd(*ranks: tuple[int, int]) -> str:
    return "\n".join(MPD_RANK.format(r=r) + "\n" + MPD_SIGNAL.format(r=r, s=s) for r, s in ranks)


def _explained(text: str) -> tuple[str | None, str, str | None]:
    got = explain_bytes(text.encode()).to_dict()
    return got["category"], got["blame"], got["node"]


def test_mpd_exit_status_lines_are_read_by_the_signal_reasoner() -> None:
    segv = classify_text(MPD_SIGNAL.format(r=2, s=11))
    kill = classify_text(MPD_SIGNAL.format(r=3, s=9))
    code = classify_text(MPD_CODE.format(r=0, c=1))
    assert segv is not None and kill is not None and code is not None
    assert (segv.category, segv.blame, segv.signal) == ("user_code", "job", 11)
    assert (kill.category, kill.blame, kill.signal) == ("oom_host", "unknown", 9)
    assert (code.category, code.blame) == ("user_code", "job")
    assert classify_text(MPD_CODE.format(r=0, c=0)) is None  # status 0 is no failure


def test_mpd_sigkill_beside_a_crashed_rank_is_the_teardown_not_the_cause() -> None:
    # the SIGKILL is printed first and last: neither order makes it the cause
    assert _explained(_mpd((0, 9), (1, 8), (2, 9))) == ("user_code", "job", None)


def test_a_lone_mpd_sigkill_keeps_its_reading_as_host_memory_with_unknown_blame() -> None:
    assert _explained(_mpd((1, 9))) == ("oom_host", "unknown", None)


def test_hydra_rank_killed_beside_a_segfaulted_rank_names_the_crashed_rank_host() -> None:
    text = HYDRA.format(r=0, pid=31337, host="cn101", s=11, word="Segmentation fault")
    text += "\n" + HYDRA.format(r=1, pid=31338, host="cn102", s=9, word="Killed")
    assert _explained(text) == ("user_code", "job", "cn101")


def test_srun_task_killed_beside_a_task_that_segfaulted_blames_the_program() -> None:
    text = "\n".join(
        [
            SRUN.format(host="gpu-a07", t=0, word="Segmentation fault (core dumped)"),
            SRUN.format(host="gpu-a08", t=1, word="Killed"),
        ]
    )
    assert _explained(text) == ("user_code", "job", "gpu-a07")


def test_a_lone_srun_task_killed_keeps_the_host_memory_reading() -> None:
    assert _explained(SRUN.format(host="gpu-a08", t=1, word="Killed")) == (
        "oom_host",
        "unknown",
        "gpu-a08",
    )


def test_a_stated_oom_kill_stays_the_cause_beside_a_segfault() -> None:
    text = "\n".join(
        [
            "slurmstepd: error: Detected 1 oom_kill event in StepId=4242.0. Some of the step "
            "tasks have been OOM Killed.",
            SRUN.format(host="gpu-a07", t=0, word="Segmentation fault (core dumped)"),
        ]
    )
    assert _explained(text)[0] == "oom_host"


def test_sigabrt_does_not_make_a_sigkill_the_teardown() -> None:
    # a watchdog's std::abort() after a peer's kill: the SIGKILL may be the OOM killer's
    kill, abrt = signal_verdict(9), signal_verdict(6)
    assert after_crash([kill, abrt]) == [kill, abrt]


def test_sigbus_and_sigfpe_beside_sigkill_make_it_the_teardown() -> None:
    for crash in (7, 8, 4, 11):
        kill, told = after_crash([signal_verdict(9), signal_verdict(crash)])
        assert kill is not None and kill.category is None and kill.signal == 9
        assert told == signal_verdict(crash)


def _filed_live(
    session_factory: sessionmaker[Session], job: str, text: str
) -> set[tuple[str, str]]:
    """(category, blame) of the incidents one correlator pass opens for the job's log `text`,
    its lines a second apart in reading order."""
    fleet = Fleet(session_factory)
    fleet.nodes(["login1"])
    fleet.job(job, ["login1"], start=1_000.0, gpus=[0])
    events = parse_job_text(text, node="login1", job_id=job, suspects=True)
    for k, ev in enumerate(events):
        ev.ts = 2_000.0 + k
    fleet.events(*events)
    fleet.correlate(now=2_100.0)
    with session_factory() as s:
        return {(i.category, i.blame) for i in incidents.list_incidents(s, state="open")}


def test_live_correlator_reads_the_mpd_teardown_as_explain_does(
    session_factory: sessionmaker[Session],
) -> None:
    # the SIGKILL is the latest line: the live correlator's tie-break on time would take it
    text = _mpd((1, 11), (0, 11), (3, 9))
    assert _filed_live(session_factory, "777", text) == {("user_code", "job")}
    assert _explained(text)[:2] == ("user_code", "job")


def test_live_correlator_keeps_a_lone_sigkill_as_host_memory(
    session_factory: sessionmaker[Session],
) -> None:
    assert _filed_live(session_factory, "778", _mpd((3, 9))) == {("oom_host", "unknown")}
