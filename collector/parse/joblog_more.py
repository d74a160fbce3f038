"""Recognizers for failure lines that launchers, MPI runtimes, Ray, UCX, the c10d store, Slurm's
step daemons and node tools print into a job's stdout/stderr.

They say only *that* a line reports a failure and what it states (an exit code, a signal, the
node it names, the text); the correlator's rules decide what it means. Formats are the emitters'
own (cited in correlator/rules/emitters/*.json, where their meaning is written down).
"""

from __future__ import annotations

import re
import signal
from typing import Any

from collector.parse.joblog_rules import JobMatch
from timeline.models import EventKind, Severity

# strsignal(3) words ("Killed", "Segmentation fault") and names ("SIGKILL") -> signal number.
_SIGNALS: dict[str, int] = {s.name.lower(): int(s) for s in signal.Signals}
_SIGNALS.update(
    {w.lower(): int(s) for s in signal.Signals if (w := signal.strsignal(s)) and not w[0].isdigit()}
)
# Hosts a paste masks or leaves as a placeholder are not hosts.
_NOT_A_HOST = re.compile(r"^(?:x{3,}|hostname|node|host|<[^>]*>|\.+)$", re.I)

# --- launcher exit reports: (format, how its code is written) --------------------------------
# "neg": a negative code is the signal (Python subprocess); "shell": 128 + N is signal N;
# "both": either (a CalledProcessError's child may itself be a shell or container runtime).
_EXITS: list[tuple[str, re.Pattern[str], str]] = [
    # DeepSpeed launch.py's Popen returncode: -N, or 128 + N when a shell runs the rank
    ("deepspeed", re.compile(r"exits with return code = (?P<code>-?\d+)"), "both"),
    ("subprocess", re.compile(r"died with <Signals\.(?P<sig>SIG\w+): \d+>"), "neg"),
    ("subprocess", re.compile(r"returned non-zero exit status (?P<code>-?\d+)"), "both"),
    ("elastic", re.compile(r"\bSignal (?P<num>\d+) \(SIG\w+\) received by PID \d+"), "neg"),
    (
        "dataloader",
        re.compile(
            r"DataLoader worker \(pid\(?s?\)? [\d, ]+\)? is killed by signal: (?P<sig>[A-Za-z ]+)"
        ),
        "neg",
    ),
    ("mp_spawn", re.compile(r"process \d+ terminated with signal (?P<sig>SIG\w+)"), "neg"),
    ("mp_spawn", re.compile(r"process \d+ terminated with exit code (?P<code>\d+)"), "neg"),
    (
        "mpirun",
        re.compile(
            r"noticed that process rank \d+ with PID \S+ on node (?P<node>\S+?) exited on\s+"
            r"signal (?P<num>\d+)"
        ),
        "neg",
    ),
    (
        "pals",  # HPE Cray PALS mpiexec: "<host>: rank 12 died from signal 6 [and dumped core]"
        re.compile(r"^\s*(?P<node>[A-Za-z0-9][\w.-]*): rank \d+ died from signal (?P<num>\d+)"),
        "neg",
    ),
    ("hydra", re.compile(r"=\s+KILLED BY SIGNAL: (?P<num>\d+)"), "neg"),
    # Open MPI's signal handler (opal/util/stacktrace.c show_stackframe): "[host:pid] Signal:
    # Aborted (6)", the strsignal word and its number, under "*** Process received signal ***"
    (
        "openmpi",
        re.compile(r"^\s*\[[\w.-]{1,64}:\d{1,10}\] Signal: [^()\n]{1,40} \((?P<num>\d{1,2})\)"),
        "neg",
    ),
    (
        "hydra",
        # from the first tag after a '(' or newline only: every later one before the next '('
        # reads the same signal (retrying each of a line repeating it was quadratic)
        re.compile(
            r"(?<![^(\n])(?>[^(\n]*?(?=TERMINATED WITH THE EXIT STRING: ))"
            r"TERMINATED WITH THE EXIT STRING: [^(\n]*\(signal (?P<num>\d+)\)"
        ),
        "neg",
    ),
    (
        "shell",
        re.compile(
            r": line \d+:\s+\d+ (?P<sig>Killed|Segmentation fault|Aborted|Bus error)(?:\s|$)"
        ),
        "neg",
    ),
    ("shell", re.compile(r"^\s*(?P<sig>Killed)\s*$"), "neg"),
    (
        "runner",
        re.compile(r"exit code (?P<code>\d+) \(interrupted by signal \d+: SIG\w+\)"),
        "shell",
    ),
    ("kubectl", re.compile(r"command terminated with exit code (?P<code>\d+)"), "shell"),
]


def _signal_of(m: re.Match[str]) -> int | None:
    groups = m.groupdict()
    if groups.get("num"):
        return int(groups["num"])
    word = (groups.get("sig") or "").strip().lower()
    return _SIGNALS.get(word) if word else None


def launcher_exit(line: str) -> JobMatch | None:
    """A launcher's report that a worker ended: its exit code and/or the signal that ended it."""
    if not _EXIT_GATE.search(line):
        return None
    for name, pattern, style in _EXITS:
        m = pattern.search(line)
        if m is None:
            continue
        p: dict[str, Any] = {"launcher": name}
        sig, code = _signal_of(m), m.groupdict().get("code")
        if code is not None:
            p["exit_code"] = int(code)
            if style in ("neg", "both") and int(code) < 0:
                sig = -int(code)
            elif style in ("shell", "both") and 128 < int(code) < 160:
                sig = int(code) - 128
        if sig is not None:
            p["signal"] = sig
        if len(p) == 1 or p.get("exit_code") == 0:
            return None  # a clean exit, or a word that names no signal
        node = m.groupdict().get("node")
        named = node if node and not _NOT_A_HOST.match(node) else None
        what = f"signal {sig}" if sig is not None else f"exit code {p['exit_code']}"
        msg = f"{name}: a worker ended with {what}"
        return JobMatch(
            EventKind.CHILD_FAILED, msg, p.get("exit_code"), Severity.ERROR, p, node=named
        )
    return None


# The words of every exit report above: launcher_exit's gate, and a part of WORTH_A_LOOK.
_EXIT_WORDS = (
    r"return code|died with|died from signal|exit status|received by PID|killed by signal|"
    r"terminated with|\] Signal: |"
    r"exited on|KILLED BY|EXIT STRING|Killed|Segmentation fault|Aborted|Bus error|exit code"
)
_EXIT_GATE = re.compile(_EXIT_WORDS)

# --- other failure lines: their text goes to the correlator's rules as it is -----------------
_HOST_OOM = re.compile(
    r"Task was killed due to the node running low on memory|killed due to memory pressure \(OOM\)|"
    r"Worker exit type: NODE_OUT_OF_MEMORY|RayOutOfMemoryError|A process exceeded memory limits|"
    r"Exceeded (?:job|step) memory limit"
)
_FAILURE_LINES: list[tuple[str, re.Pattern[str]]] = [
    ("ucx", re.compile(r"\bib_mlx5\w*\.c:\d+\s+\S|uct_ib_mlx5_completion_with_err")),
    (
        "mpi",
        re.compile(
            r"(?:ORTE|PRTE|PRRTE) has lost communication|Remote daemon\s*:\s*\[\[|"
            r"(?:ORTE|PRTE|PRRTE) daemon has unexpectedly failed|MPI_ABORT was invoked|"
            r"\[btl_tcp\w*\.c:\d+:\w+\] connect\(\) to|A critical communication path was lost"
        ),
    ),
    (
        "c10d",
        re.compile(
            r"\[c10d\].{0,200}(?:failed|timed out|reset by peer)|TCP client failed to connect|"
            r"DistNetworkError|DistStoreError|RendezvousConnectionError|RendezvousTimeoutError|"
            r"Connection closed by peer \[|(?:Read|Write) error \[|Timed out waiting \d+ms for|"
            r"async error on socket"
        ),
    ),
    (
        "slurm",
        re.compile(
            r"slurmstepd(?:-\S+)?: error: (?!.*(?:oom[-_]kill event|\*\*\*))|"
            r"srun: error: (?!\S+: tasks? [\d,-]+: )"
        ),
    ),
    (
        "pytorch",  # PyTorch's and Paddle's DataLoader workers, PyTorch's CUDA initialisation
        re.compile(
            r"(?i:Unexpected bus error encountered in (?:DataLoader )?worker)|out of shared memory|"
            r"insufficient shared storage space|No CUDA GPUs are available|"
            r"Found no NVIDIA driver on your system|CUDA driver initialization failed|"
            r"NVIDIA driver on your system is too old"
        ),
    ),
    ("nccl", re.compile(r"NCCL failure \S+ 'unhandled cuda error'")),
    (
        "node_tools",
        re.compile(
            r"Failed to initialize NVML|NVIDIA-SMI has failed|nvidia-container-cli(?:\.real)?: |"
            r"Driver/library version mismatch|Unable to determine the device handle"
        ),
    ),
    (
        "os",
        re.compile(
            r"No space left on device|Read-only file system|Stale file handle|"
            r"Input/output error|Cannot allocate memory|std::bad_alloc|\bMemoryError\b"
        ),
    ),
]


def failure_line(line: str) -> JobMatch | None:
    """A failure line of an emitter whose meaning the correlator's rules hold."""
    text = line.strip()
    if _HOST_OOM.search(text):
        return JobMatch(
            EventKind.HOST_OOM, text, None, Severity.ERROR, {"text": text, "emitter": "runtime"}
        )
    for emitter, pattern in _FAILURE_LINES:
        if pattern.search(text):
            p = {"text": text, "emitter": emitter}
            return JobMatch(EventKind.OTHER, text, None, Severity.ERROR, p)
    return None


# Lines worth offering to the recognizers above (a cheap test before the regexes).
WORTH_A_LOOK = re.compile(
    _EXIT_WORDS + r"|low on memory|memory pressure|OUT_OF_MEMORY|OutOfMemory|memory limit|ib_mlx5|"
    r"ORTE|PRTE|Remote daemon|MPI_ABORT|btl_tcp|communication path|c10d|TCP client|Dist\w+Error|"
    r"Rendezvous|closed by peer|Read error|Write error|Timed out waiting|socket|slurmstepd|"
    r"srun: error|NVML|NVIDIA-SMI|nvidia-container-cli|version mismatch|device handle|"
    r"No space left|Read-only file|Stale file|Input/output error|allocate memory|bad_alloc|"
    r"MemoryError|bus error|BUS error|shared memory|shared storage|CUDA GPUs|"
    r"NVIDIA driver|CUDA driver|unhandled cuda"
)
