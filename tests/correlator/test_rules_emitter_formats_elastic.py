"""torchrun / torch elastic signal and exit lines, with every signal Python's `signal` names.

Formats (pytorch/pytorch, torch/distributed/elastic): multiprocessing/api.py @8f4329ea55
SubprocessContext._poll "failed (exitcode: {exitcode}) local_rank: {local_rank} (pid: {pid}) of
binary: {entrypoint}" (a negative exitcode is Popen's -N for signal N), MultiprocessContext's "...
of fn: {fn_name} (start_method: {start_method})", _close's "Sending process {pid} closing signal
{death_sig.name}" / "Closing process {pid} via signal {death_sig.name}" / "Unable to shutdown
process {pid} via {death_sig}, forcefully exitting via {_get_kill_signal()}" (newer: "exiting"),
_terminate_process_handler's SignalException "Process {pid} got signal: {sigval}" (handlers for
SIGTERM, SIGINT, SIGHUP, SIGQUIT); agent/server/api.py's "Received %s death signal, shutting
down workers" (e.sigval: "Signals.SIGTERM" under Python <= 3.10's Enum str, "15" from 3.11). Each
behind torch's glog-style prefix and logging's default "LEVEL:logger:" prefix.

Verdicts per correlator/rules/signals.py's documented meanings: SIGKILL and SIGBUS oom_host /
unknown, crash signals user_code / job, any other signal a consequence (no category); a plain
exit status user_code / job. A consequence line must still be *recognised* (its explanation names
the signal), so a probe fails when no rule reads the line at all.
"""

from __future__ import annotations

import signal

import pytest

from correlator.explain import explain_text
from tests.correlator.emitter_probe import Fmt, params

_MP = "pytorch/pytorch torch/distributed/elastic/multiprocessing/api.py@8f4329ea55"
_AGENT = "pytorch/pytorch torch/distributed/elastic/agent/server/api.py"
_GLOG = "{lvl}{md} {hms}.{us} {ppid} torch/distributed/elastic/{mod}.py:{line}] "
_LOGGING = "{level}:torch.distributed.elastic.{dotted}:"
_CLOCK = {"md": ("0616", "1102"), "hms": ("00:37:22", "04:09:40"), "us": ("830000", "004211")}
CONSEQUENCE = (None, "unknown")
# Linux numbering, as Python's signal module names them (SIGRTMIN/SIGRTMAX included)
SIGNALS = tuple(sorted(signal.Signals, key=int))


def want_of(sig: int) -> tuple[str | None, str]:
    """signals.py's documented reading of a process killed by signal `sig`."""
    if sig in (9, 7):
        return ("oom_host", "unknown")
    if sig in (11, 6, 8, 4):
        return ("user_code", "job")
    return CONSEQUENCE


def _fmt(key: str, src: str, mod: str, body: str, want: tuple, lvl: str, **values: tuple) -> Fmt:
    """`body` as the elastic module `mod` logs it at level `lvl` (E/W/I) in both prefixes."""
    level = {"E": "ERROR", "W": "WARNING", "I": "INFO"}[lvl]
    return Fmt(
        key,
        src,
        body + "\n",
        {
            "lvl": (lvl,),
            "level": (level,),
            "mod": (mod,),
            "dotted": (mod.replace("/", "."),),
            "ppid": (4015698, 812),
            "line": (900, 719, 874),
            "pid": (4015788, 3721028, 55),
            **_CLOCK,
            **values,
        },
        want,
        prefixes=(_GLOG, _LOGGING, ""),
    )


_BINARY = {"lr": (0, 3, 7), "binary": ("/usr/bin/python3", "/opt/conda/bin/python", "train.sh")}
FAILED = (
    [
        _fmt(
            f"failed-{s.name}",
            _MP,
            "multiprocessing/api",
            f"failed (exitcode: {-int(s)}) local_rank: {{lr}} (pid: {{pid}}) of binary: {{binary}}",
            want_of(int(s)),
            "E",
            **_BINARY,
        )
        for s in SIGNALS
    ]
    + [
        _fmt(
            f"failed-exit-{c}",
            _MP,
            "multiprocessing/api",
            f"failed (exitcode: {c}) local_rank: {{lr}} (pid: {{pid}}) of binary: {{binary}}",
            ("user_code", "job"),
            "E",
            **_BINARY,
        )
        for c in (1, 2, 3, 42, 126, 127, 255)
    ]
    + [
        _fmt(
            f"failed-fn-{c}",
            _MP,
            "multiprocessing/api",
            f"failed (exitcode: {c}) local_rank: {{lr}} (pid: {{pid}}) of fn: {{fn}} "
            "(start_method: {sm})",
            want,
            "E",
            lr=(0, 5),
            fn=("main", "Trainer.run", "_wrapped_fn"),
            sm=("spawn", "fork"),
        )
        for c, want in (
            (1, ("user_code", "job")),
            (-9, want_of(9)),
            (-11, want_of(11)),
            (-15, CONSEQUENCE),
        )
    ]
)

# the signals the agent's handler is registered for, as their names and as Enum/int print them
_DEATH = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)
CLOSING = [
    _fmt(
        "closing-signal",
        _MP,
        "multiprocessing/api",
        "Sending process {pid} closing signal {sig}",
        CONSEQUENCE,
        "W",
        sig=tuple(s.name for s in (*_DEATH, signal.SIGKILL)),
    ),
    _fmt(
        "closing-via-signal",
        _MP,
        "multiprocessing/api",
        "Closing process {pid} via signal {sig}",
        CONSEQUENCE,
        "W",
        sig=tuple(s.name for s in _DEATH),
    ),
    _fmt(
        "unable-to-shutdown",
        _MP,
        "multiprocessing/api",
        "Unable to shutdown process {pid} via {sig}, forcefully {exiting} via {kill}",
        CONSEQUENCE,
        "W",
        sig=("15", "Signals.SIGTERM", "2", "Signals.SIGINT"),
        exiting=("exitting", "exiting"),
        kill=("9", "Signals.SIGKILL"),
    ),
    _fmt(
        "signal-exception",
        _MP,
        "multiprocessing/api",
        "torch.distributed.elastic.multiprocessing.api.SignalException: "
        "Process {pid} got signal: {sig}",
        CONSEQUENCE,
        "E",
        sig=tuple(str(int(s)) for s in _DEATH),
    ),
    _fmt(
        "death-signal",
        _AGENT,
        "agent/server/api",
        "Received {sig} death signal, shutting down workers",
        CONSEQUENCE,
        "W",
        sig=(*(str(int(s)) for s in _DEATH), *(f"Signals.{s.name}" for s in _DEATH)),
    ),
]

FORMATS = FAILED + CLOSING


@pytest.mark.parametrize(("fmt", "text", "node"), params(FORMATS))
def test_an_elastic_signal_line_reads_as_the_signal_documents(
    fmt: Fmt, text: str, node: str | None
) -> None:
    got = explain_text(text)
    assert (got.category, got.blame) == fmt.want, (fmt.source, text, got.explanation)
    # a consequence is a reading too: the line must not be passed over as unrecognised
    assert not got.explanation.startswith("No failure evidence"), (fmt.source, text)
