"""Open MPI / PRRTE launcher reports and Open MPI's stacktrace from their own formats, with the
culprit host (probe set seven).

Formats (each Fmt cites its own):
- open-mpi/ompi orte/tools/orterun/help-orterun.txt @4fe93320a9: [orterun:proc-aborted-strsignal]
  "%s noticed that process rank %lu with PID %lu on node %s exited on signal %d (%s).",
  [orterun:proc-ordered-abort] "... on\\nnode %s calling \\"abort\\"", [orterun:proc-exit-no-sync]
  "... on\\nnode %s exiting improperly"; openpmix/prrte src/docs/show-help-files/help-prun.txt
  @04df00eb93 [prun:proc-aborted-strsignal] (the same sentence from "prterun") and open-mpi/prrte
  src/mca/schizo/prte/help-prun.txt @7b9619b1d1 (wrapped after "calling"/"exiting"/"exited on");
- orte/mca/errmgr/base/help-errmgr-base.txt @097df599c5 [node-died] "ORTE has lost communication
  with a remote daemon. / HNP daemon : %s on node %s / Remote daemon: %s on node %s" (PRRTE's
  "PRTE has lost ...", daemons "[nspace@0,vpid]"), [failed-daemon]; orte/mca/errmgr/base
  errmgr_base_fns.c "%s ORTE_ERROR_LOG: %s in file %s at line %d";
- ompi/mpi/help-mpi-api.txt "MPI_ABORT was invoked on rank %d in communicator %s with errorcode
  %d.";
- open-mpi/ompi opal/util/stacktrace.c @7b1b3fcbc1 HOSTFORMAT "[%s:%05d] ": "*** Process received
  signal ***", "Signal: %s (%d)" (strsignal), "Signal code: %s (%d)", "Failing at address: %p"
  (SIGILL/SIGFPE/SIGSEGV/SIGBUS), "*** End of error message ***";
- help-mpi-btl-openib.txt [error in device init] "WARNING: There was an error initializing an
  OpenFabrics device." (a warning: no rule reads it, and none should alone).
MPICH Hydra's and UCX's formats are probed in test_rules_emitter_formats_mpi_hydra_ucx.py.

Deliveries: a rank's own lines (stacktrace, UCX) plain, behind Open MPI's --tag-output
"[1,3]<stderr>:", --timestamp-output (orte/mca/iof/base/iof_base_output.c: ctime() then
"<stderr>:" or "[1,3]<stderr>:"), srun -l's "3: "; mpirun's own help blocks plain, behind srun -l's
label and behind pdsh's "host: " where the host is mpirun's (the HNP's), never the culprit.

Verdicts: the corpus README's policy (signals: 9 and 7 oom_host/unknown, 11/6/8/4 user_code/job;
a lost daemon interconnect/unknown on the Remote daemon's node, never the HNP's; Open MPI's
"[host:pid] *** Process received signal ***" names the crashed rank's host; a runtime's own error
trace is a symptom naming no culprit).
"""

from __future__ import annotations

from typing import Any

import pytest

from correlator.explain import explain_text
from tests.correlator.emitter_probe import HOSTS, Fmt, check, params

OMPI = "open-mpi/ompi orte/tools/orterun/help-orterun.txt@4fe93320a9"
PRUN = "openpmix/prrte src/docs/show-help-files/help-prun.txt@04df00eb93"
ERRMGR = "open-mpi/ompi orte/mca/errmgr/base/help-errmgr-base.txt@097df599c5"
STACK = "open-mpi/ompi opal/util/stacktrace.c@7b1b3fcbc1"
OOM_HOST = ("oom_host", "unknown")
USER = ("user_code", "job")
NET = ("interconnect", "unknown")
IB = ("interconnect", "infra")
DASH = "-" * 74
# (signal, strsignal, verdict) for the signals a launcher reports
SIGNALS = (
    (9, "Killed", OOM_HOST),
    (11, "Segmentation fault", USER),
    (6, "Aborted", USER),
    (7, "Bus error", OOM_HOST),
    (8, "Floating point exception", USER),
    (4, "Illegal instruction", USER),
)
# a rank's own line: plain, --tag-output, --timestamp-output (alone and with tags), srun -l
RANK_TAGS = (
    "",
    "[1,3]<stderr>:",
    "Mon Mar  4 10:00:01 2024<stderr>:",
    "Tue Nov 12 08:14:02 2024[1,17]<stderr>:",
    "3: ",
    "[1,0]<stdout>:",
)
# mpirun's own lines: plain, srun -l's label, pdsh's "host: " with mpirun's (the HNP's) host
HNP = ("login-01", "node0001", "head-node-3")
LAUNCH_TAGS = ("", "0: ", "login-01: ", "node0001: ")
PIDS = (4711, 902211, 31180, 12345)
# stacktrace.c's "%05d" and log.c's "%-5d" of the same pids
PID05 = ("04711", "902211", "31180", "12345")
PIDL5 = ("4711 ", "902211", "31180", "12345")
RANKS = (3, 0, 17, 255)


def _lines(*lines: str) -> str:
    """A block whose every line carries the delivery's "{pre}" label."""
    return "".join("{pre}" + line + "\n" for line in lines)


def _launcher(key: str, src: str, body: tuple[str, ...], want: Any, **values: Any) -> Fmt:
    culprit = values.pop("culprit", "host")
    return Fmt(
        key,
        src,
        _lines(*body),
        {"host": HOSTS, "pid": PIDS, "rank": RANKS, "hnp": HNP, "pre": LAUNCH_TAGS, **values},
        want,
        culprit=culprit,
    )


def _node_died(key: str, rte: str, daemon: str, fams: tuple[int, ...]) -> Fmt:
    """help-errmgr-base.txt [node-died] as ORTE and PRRTE print it, with their daemon names
    (`daemon` with "#" where the daemon's vpid goes)."""
    return _launcher(
        f"{key}-node-died",
        ERRMGR,
        (
            DASH,
            f"{rte} has lost communication with a remote daemon.",
            "",
            "  HNP daemon   : " + daemon.replace("#", "0") + " on node {hnp}",
            "  Remote daemon: " + daemon.replace("#", "{vpid}") + " on node {host}",
            "",
            "This is usually due to either a failure of the TCP network",
            "connection to the node, or possibly an internal failure of",
            "the daemon itself. We cannot recover from this failure, and",
            "therefore will terminate the job.",
            DASH,
        ),
        NET,
        fam=fams,
        vpid=(1, 7, 31),
    )


def _aborted(key: str, who: str, wrap: bool) -> list[Fmt]:
    tail = (
        ("exited on", "signal {sig} ({name}).") if wrap else ("exited on signal {sig} ({name}).",)
    )
    out = []
    for sig, name, want in SIGNALS:
        head = f"{who} noticed that process rank {{rank}} with PID {{pid}} on node {{host}}"
        body = (DASH, f"{head} {tail[0]}", *tail[1:], DASH)
        out.append(
            _launcher(
                f"{key}-sig{sig}", PRUN if wrap else OMPI, body, want, sig=(sig,), name=(name,)
            )
        )
    return out


ORTE = [
    *_aborted("orte-aborted", "mpirun", False),
    *_aborted("prte-aborted", "prterun", False),
    *_aborted("prte-aborted-wrapped", "prterun", True),
    _launcher(
        "orte-ordered-abort",
        OMPI,
        (
            DASH,
            "mpirun has exited due to process rank {rank} with PID {pid} on",
            'node {host} calling "abort". This may have caused other processes',
            "in the application to be terminated by signals sent by mpirun",
            "(as reported here).",
            DASH,
        ),
        USER,
    ),
    _launcher(
        "prte-ordered-abort",
        PRUN,
        (
            "prterun has exited due to process rank {rank} with PID {pid} on node {host} calling",
            '"abort". This may have caused other processes in the application to be',
            "terminated by signals sent by prterun (as reported here).",
        ),
        USER,
    ),
    _launcher(
        "orte-exit-no-sync",
        OMPI,
        (
            DASH,
            "mpirun has exited due to process rank {rank} with PID {pid} on",
            "node {host} exiting improperly. There are three reasons this could occur:",
            "",
            '1. this process did not call "init" before exiting, but others in',
            DASH,
        ),
        USER,
    ),
    _launcher(
        "prte-exit-no-sync",
        PRUN,
        (
            "prterun has exited due to process rank {rank} with PID {pid} on node {host} exiting",
            "improperly. There are three reasons this could occur:",
        ),
        USER,
    ),
    _node_died("orte", "ORTE", "[[{fam},0],#]", (39178, 4021, 65535)),
    _node_died("prte", "PRTE", "[prterun-{hnp}-{fam}@0,#]", (1918870, 4021, 77)),
    _launcher(
        "orte-node-died-old",
        ERRMGR,
        (
            "ORTE has lost communication with its daemon located on node:",
            "",
            "  hostname:  {host}",
            "",
            "This is usually due to either a failure of the TCP network",
            "connection to the node, or possibly an internal failure of",
            "the daemon itself. We cannot recover from this failure, and",
            "therefore will terminate the job.",
        ),
        NET,
    ),
    _launcher(
        "mpi-abort",
        "open-mpi/ompi ompi/mpi/help-mpi-api.txt",
        (
            DASH,
            "MPI_ABORT was invoked on rank {rank} in communicator {comm}",
            "with errorcode {code}.",
            "",
            "NOTE: invoking MPI_ABORT causes Open MPI to kill all MPI processes.",
            "You may or may not see output from other processes, depending on",
            "exactly when Open MPI kills them.",
            DASH,
        ),
        USER,
        comm=("MPI_COMM_WORLD", "MPI COMMUNICATOR 3 SPLIT FROM 0"),
        code=(1, 255, -1),
        culprit=None,
    ),
]

STACK_SIGNALS = (
    (11, "Segmentation fault", "Address not mapped (1)", "0x10", USER),
    (11, "Segmentation fault", "Invalid permissions (2)", "0x7f3a2c000000", USER),
    (7, "Bus error", "Non-existant physical address (2)", "0x7f0e54a3f000", OOM_HOST),
    (6, "Aborted", " (-6)", None, USER),
    (8, "Floating point exception", "Integer divide-by-zero (1)", "0x4011d6", USER),
    (4, "Illegal instruction", "Illegal operand (2)", "0x4011d6", USER),
)


def _stacktrace() -> list[Fmt]:
    out = []
    for i, (sig, name, code, addr, want) in enumerate(STACK_SIGNALS):
        pre = "{tag}[{host}:{pid05}] "
        body = [
            pre + "*** Process received signal ***",
            pre + f"Signal: {name} ({sig})",
            pre + f"Signal code: {code}",
            *([pre + f"Failing at address: {addr}"] if addr else []),
            pre + "[ 0] /lib64/libpthread.so.0(+0xf630)[0x7f3a3c1cf630]",
            pre + "[ 1] ./a.out[0x4011d6]",
            pre + "*** End of error message ***",
        ]
        values = {"host": HOSTS, "pid05": PID05, "tag": RANK_TAGS}
        out.append(
            Fmt(f"ompi-stack-{sig}-{i}", STACK, "\n".join(body) + "\n", values, want, "host")
        )
    return out


@pytest.mark.parametrize(("f", "text", "node"), params(ORTE))
def test_an_open_mpi_launcher_report_names_its_node(f: Fmt, text: str, node: str | None) -> None:
    check(f, text, node)


@pytest.mark.parametrize(("f", "text", "node"), params(_stacktrace()))
def test_open_mpi_stacktrace_names_the_crashed_ranks_host(f: Fmt, text: str, node: str) -> None:
    check(f, text, node)


ERRLOG = "open-mpi/ompi orte/mca/errmgr/base/errmgr_base_fns.c, openpmix/prrte errmgr_base_fns.c"
# "%s ORTE_ERROR_LOG: %s in file %s at line %d" behind opal_output's "[host:pid] " (the printer)
ERROR_LOGS = [
    f"{tag}[{host}:{pid}] {name} {kind}_ERROR_LOG: {err} in file {file} at line {line}\n"
    for tag, host, pid, name, kind, err, file, line in (
        (
            "",
            HOSTS[0],
            "04711",
            "[[39178,0],1]",
            "ORTE",
            "Data unpack would read past end of buffer",
            "grpcomm_direct.c",
            355,
        ),
        (
            "0: ",
            HOSTS[2],
            "902211",
            "[[4021,0],0]",
            "ORTE",
            "Not found",
            "base/plm_base_launch_support.c",
            1234,
        ),
        (
            "login-01: ",
            HOSTS[4],
            "31180",
            "[prterun-login-01-1918870@0,3]",
            "PRTE",
            "Unreachable",
            "base/grpcomm_base_stubs.c",
            287,
        ),
    )
]
# lines that show no failure: a healthy run's output, and a warning that is not one
HEALTHY = [
    "".join(f"{h}\n" for h in HOSTS[:4]),
    "".join(f"[1,{r}]<stdout>:Hello from rank {r} of 8 on {HOSTS[r % 3]}\n" for r in range(8)),
    "".join(f"{r}: Hello from rank {r} of 4 on {HOSTS[5]}\n" for r in range(4)),
    f"{DASH}\nWARNING: There was an error initializing an OpenFabrics device.\n\n"
    f"  Local host:   {HOSTS[1]}\n  Local device: mlx5_0\n{DASH}\n",
]


@pytest.mark.parametrize("text", ERROR_LOGS)
def test_a_runtime_error_log_is_a_symptom_that_names_no_culprit(text: str) -> None:
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == (None, "unknown", None), (ERRLOG, got)
    assert not got.explanation.startswith("No failure evidence"), text
    # before a rank's own report it decides nothing: the rank's signal does
    rank = (
        f"mpirun noticed that process rank 3 with PID 4711 on node {HOSTS[3]} exited on signal "
        "11 (Segmentation fault).\n"
    )
    got = explain_text(text + rank)
    assert (got.category, got.blame, got.node) == (*USER, HOSTS[3]), (ERRLOG, got)


@pytest.mark.parametrize("text", HEALTHY)
def test_a_healthy_run_or_a_device_warning_reads_as_nothing(text: str) -> None:
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == (None, "unknown", None), (text, got)
