"""DeepSpeed's and accelerate's launcher reports, from their own formats, with the codes they print.

Formats:
- deepspeedai/DeepSpeed deepspeed/launcher/launch.py @edaa7221267243c7be7fb49c5d5f5c4fb97b4641:
  sigkill_handler's logger.info(f"Killing subprocess {process.pid}"), logger.error(f"{cmd} exits
  with return code = {last_return_code}") then sys.exit(last_return_code) (so the node's exit
  status is the code mod 256: -9 exits 247), logger.info(f"Main process received
  {sig_names[signum]}, exiting"), the poll loop's logger.info(f"Process {process.pid} exits
  successfully."); `cmd` is the rank's argv list (its repr). The logger's format is
  deepspeed/utils/logging.py's "[%(asctime)s] [%(levelname)s] [%(filename)s:%(lineno)d:
  %(funcName)s] %(message)s" (older releases logged the same lines at launch.py:315-324).
- the same commit's deepspeed/launcher/runner.py (logger.info(f"cmd = {' '.join(cmd)}")) and
  multinode_runner.py (PDSHRunner: `pdsh -S -f 1024 -w <hosts>`, each remote line relayed as
  "<host>: <line>"; SlurmRunner: srun; OpenMPIRunner: mpirun).
- chaos/pdsh src/common/pipecmd.c @21f59962d44abbdc66a5072384257cf2a01218f3: pipecmd_wait's
  err("%p: %S: %s exited with exit code %d\\n", ...) where %p is "pdsh@<launching host>" and %S
  the remote host.
- huggingface/accelerate src/accelerate/commands/launch.py
  @16cb6eb80dd9aa8b4df1a63ef57863e455d53b83: simple_launcher / deepspeed_launcher raise
  subprocess.CalledProcessError(returncode=process.returncode, cmd=cmd); CPython's
  CalledProcessError.__str__ prints "Command '%s' died with %r." (a negative code: the Signals
  member's repr) or "Command '%s' returned non-zero exit status %d.".

Verdicts: correlator/rules/signals.py and the corpus README's policy: SIGKILL (-9, 137, 247 being
DeepSpeed's sys.exit(-9) seen by pdsh) alone is oom_host/unknown, SIGSEGV/SIGABRT and plain
exit statuses user_code/job; an error printed beside the exit decides instead (CUDA OOM
oom_gpu/job, an illegal address user_code/job, the kernel OOM killer oom_host/job, an
uncorrectable ECC error gpu_hardware/node, a watchdog timeout nccl_timeout_unknown/unknown). The
node is the host of pdsh's "<host>: " prefix, never a host of the launch command line.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import pytest

from correlator.explain import explain_text
from correlator.rules.signals import decode

DS = "deepspeedai/DeepSpeed deepspeed/launcher/launch.py@edaa7221267243c7be7fb49c5d5f5c4fb97b4641"
DS_RUNNER = (
    "deepspeedai/DeepSpeed deepspeed/launcher/runner.py, multinode_runner.py"
    "@edaa7221267243c7be7fb49c5d5f5c4fb97b4641"
)
PDSH = "chaos/pdsh src/common/pipecmd.c@21f59962d44abbdc66a5072384257cf2a01218f3"
ACC = (
    "huggingface/accelerate src/accelerate/commands/launch.py"
    "@16cb6eb80dd9aa8b4df1a63ef57863e455d53b83"
)
OOM_HOST = ("oom_host", "unknown")
USER = ("user_code", "job")
CONSEQUENCE = (None, "unknown")
NODE = ("node", "node")
# (code as Popen's returncode, reading): negative = the signal; 128+N = a shell in between
CODES: tuple[tuple[int, tuple[str | None, str]], ...] = (
    (-9, OOM_HOST),
    (137, OOM_HOST),
    (-11, USER),
    (139, USER),
    (-6, USER),
    (134, USER),
    (1, USER),
    (-7, OOM_HOST),
    (-15, CONSEQUENCE),
)
HOSTS = ("worker-1", "node0123", "dgx-h100-031", "ip-10-1-2-3", "gpu-a-07", "GPU-NODE-44")
LAUNCHER = ("worker-0", "login-01", "node0001")
CMDS = (
    "['/usr/bin/python3', '-u', 'train.py', '--local_rank=3', '--deepspeed', 'ds_config.json']",
    "['/opt/conda/bin/python', '-u', '-m', 'src.train', '--local_rank=0', '--lr', '1e-4']",
    "['/usr/bin/python', '-u', 'pretrain_gpt.py', '--tensor-model-parallel-size', '8']",
)
STAMPS = ("2024-03-20 20:31:29,269", "2023-07-10 04:26:35,999", "2025-11-02 09:00:01,004")


class Probe(NamedTuple):
    """One instantiated report: its text, the verdict the policy gives, the node it names."""

    source: str
    text: str
    want: tuple[str | None, str]
    node: str | None


def _ds(level: str, line: int, msg: str, stamp: str) -> str:
    return f"[{stamp}] [{level}] [launch.py:{line}:sigkill_handler] {msg}"


def _relay(lines: list[str], host: str | None) -> str:
    """The lines as they reach the user: pdsh prefixes each remote line with "<host>: "."""
    pre = f"{host}: " if host else ""
    return "".join(f"{pre}{line}\n" for line in lines)


def _rc_lines(code: int, i: int, killing: bool) -> list[str]:
    stamp, cmd = STAMPS[i % len(STAMPS)], CMDS[i % len(CMDS)]
    kills = [_ds("INFO", 335, f"Killing subprocess {p}", stamp) for p in (94984, 94985)]
    rc = _ds("ERROR", 341, f"{cmd} exits with return code = {code}", stamp)
    return [*kills, rc] if killing else [rc]


def _pdsh_exit(code: int, host: str, i: int) -> str:
    # sys.exit(code) leaves the remote python with status code mod 256; ssh relays it
    return f"pdsh@{LAUNCHER[i % len(LAUNCHER)]}: {host}: ssh exited with exit code {code % 256}\n"


def deepspeed_exits() -> list[Any]:
    """Each code as launch.py reports it: bare, through pdsh, with its kills and pdsh's exit."""
    out: list[Any] = []
    i = 0
    for code, want in CODES:
        for host in (None, HOSTS[i % len(HOSTS)]):
            for killing in (False, True):
                text = _relay(_rc_lines(code, i, killing), host)
                out.append(pytest.param(Probe(DS, text, want, host), id=f"ds-rc{code}-{i}"))
                i += 1
            if host:
                text = _relay(_rc_lines(code, i, True), host) + _pdsh_exit(code, host, i)
                out.append(pytest.param(Probe(DS, text, want, host), id=f"ds-rc{code}-pdsh{i}"))
                i += 1
    return out


def pdsh_exits() -> list[Any]:
    """pdsh's own line for a remote command's exit status (shell 128+N included)."""
    wants = (
        (1, USER),
        (2, USER),
        (137, OOM_HOST),
        (139, USER),
        (134, USER),
        # DeepSpeed's launch.py exits with the rank's negative code: sys.exit(-9) leaves 247
        (247, OOM_HOST),
        (245, USER),
        (250, USER),
        (241, CONSEQUENCE),
        # ssh(1) EXIT STATUS (openssh-portable ssh.1): "ssh exits with the exit status of the
        # remote command or with 255 if an error occurred": ssh could not reach the host
        (255, NODE),
    )
    return [
        pytest.param(Probe(PDSH, _pdsh_exit(code, host, i), want, host), id=f"pdsh-exit{code}-{i}")
        for i, ((code, want), host) in enumerate(
            (cw, h) for cw in wants for h in (HOSTS[0], HOSTS[2], HOSTS[4])
        )
    ]


# an error printed by the rank before launch.py's exit line decides the verdict
BESIDE = (
    (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a "
        "total capacity of 79.15 GiB of which 1.06 GiB is free.",
        1,
        ("oom_gpu", "job"),
    ),
    (
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        -6,
        USER,
    ),
    (
        "RuntimeError: CUDA error: uncorrectable ECC error encountered",
        -6,
        ("gpu_hardware", "node"),
    ),
    (
        "[rank3]:[E ProcessGroupNCCL.cpp:577] [Rank 3] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=4412, OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, "
        "Timeout(ms)=1800000) ran for 1800034 milliseconds before timing out.",
        -6,
        ("nccl_timeout_unknown", "unknown"),
    ),
)
OOM_KILLER = (
    "[1234567.890123] Out of memory: Killed process 94986 (python3) total-vm:98123456kB, "
    "anon-rss:81234567kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:160000kB oom_score_adj:0"
)


def deepspeed_beside() -> list[Any]:
    """launch.py's exit line after the rank's own error, bare and through pdsh."""
    out: list[Any] = []
    cases = [*BESIDE, (OOM_KILLER, -9, ("oom_host", "job"))]
    for k, (err, code, want) in enumerate(cases):
        for j, host in enumerate((None, HOSTS[k % len(HOSTS)], HOSTS[(k + 3) % len(HOSTS)])):
            text = _relay([err, *_rc_lines(code, k + j, True)], host)
            # a collective timeout names no culprit, also behind a launcher's host prefix
            node = None if want[0] == "nccl_timeout_unknown" else host
            out.append(pytest.param(Probe(DS, text, want, node), id=f"ds-beside{k}-{j}"))
    return out


def deepspeed_other() -> list[Any]:
    """The launcher's other lines: success, its own signal, the runner's command line."""
    out: list[Any] = []
    ok = [_ds("INFO", 367, f"Process {p} exits successfully.", STAMPS[0]) for p in (4011, 4012)]
    for j, host in enumerate((None, HOSTS[1])):
        out.append(pytest.param(Probe(DS, _relay(ok, host), CONSEQUENCE, None), id=f"ds-ok{j}"))
        text = _relay([*ok, *_rc_lines(-9, j, True)], host)
        out.append(pytest.param(Probe(DS, text, OOM_HOST, host), id=f"ds-ok-then-9-{j}"))
    for j, sig in enumerate(("SIGINT", "SIGTERM")):
        lines = [
            *_rc_lines(0, j, True)[:2],
            _ds("INFO", 344, f"Main process received {sig}, exiting", STAMPS[j]),
        ]
        out.append(
            pytest.param(Probe(DS, _relay(lines, None), CONSEQUENCE, None), id=f"ds-main-{sig}")
        )
    # runner.py logs the pdsh command (every host of the job) before the remote lines
    for j, (code, want) in enumerate(((-9, OOM_HOST), (-11, USER), (1, USER))):
        host, other = HOSTS[j], HOSTS[j + 1]
        cmd = (
            f"[{STAMPS[j]}] [INFO] [runner.py:630:main] cmd = pdsh -S -f 1024 -w {other},{host} "
            "export PYTHONPATH=/workspace; cd /workspace; /usr/bin/python -u -m "
            "deepspeed.launcher.launch --world_info=eyJ3b3JrZXItMCI6IFswXX0= --node_rank=%n "
            "--master_addr=10.0.0.4 --master_port=29500 train.py --deepspeed\n"
        )
        text = cmd + _relay(_rc_lines(code, j, True), host) + _pdsh_exit(code, host, j)
        out.append(pytest.param(Probe(DS_RUNNER, text, want, host), id=f"ds-runner-cmd{j}"))
    return out


def _traceback(cmd: str, tail: str) -> str:
    return (
        "Traceback (most recent call last):\n"
        '  File "/usr/local/bin/accelerate", line 8, in <module>\n'
        "    sys.exit(main())\n"
        '  File "/usr/local/lib/python3.10/dist-packages/accelerate/commands/launch.py", '
        "line 993, in simple_launcher\n"
        "    raise subprocess.CalledProcessError(returncode=process.returncode, cmd=cmd)\n"
        f"subprocess.CalledProcessError: Command '{cmd}' {tail}\n"
    )


_SIGNALS = (
    ("SIGKILL", 9, OOM_HOST),
    ("SIGSEGV", 11, USER),
    ("SIGABRT", 6, USER),
    ("SIGBUS", 7, OOM_HOST),
    ("SIGTERM", 15, CONSEQUENCE),
)
_STATUSES = ((1, USER), (2, USER), (137, OOM_HOST), (139, USER), (134, USER), (127, USER))


def accelerate_errors() -> list[Any]:
    """CalledProcessError as accelerate raises it, alone and after the rank's own error."""
    out: list[Any] = []
    tails = [(f"died with <Signals.{n}: {v}>.", w, f"sig{v}") for n, v, w in _SIGNALS] + [
        (f"returned non-zero exit status {c}.", w, f"st{c}") for c, w in _STATUSES
    ]
    for k, (tail, want, key) in enumerate(tails):
        for j in range(2):
            text = _traceback(CMDS[(k + j) % len(CMDS)], tail)
            out.append(pytest.param(Probe(ACC, text, want, None), id=f"acc-{key}-{j}"))
    for k, (err, code, want) in enumerate(BESIDE):
        tail = (
            f"died with <Signals.SIGABRT: {-code}>."
            if code < 0
            else f"returned non-zero exit status {code}."
        )
        text = err + "\n" + _traceback(CMDS[k % len(CMDS)], tail)
        out.append(pytest.param(Probe(ACC, text, want, None), id=f"acc-beside{k}"))
    return out


ALL = deepspeed_exits() + pdsh_exits() + deepspeed_beside() + deepspeed_other()


@pytest.mark.parametrize("probe", ALL)
def test_a_deepspeed_report_reads_as_its_code_documents(probe: Probe) -> None:
    got = explain_text(probe.text)
    assert (got.category, got.blame) == probe.want, (probe.source, probe.text, got.explanation)
    assert got.node == probe.node, (probe.source, probe.text, got.node, got.explanation)


@pytest.mark.parametrize("probe", accelerate_errors())
def test_an_accelerate_launch_error_reads_as_its_code_documents(probe: Probe) -> None:
    got = explain_text(probe.text)
    assert (got.category, got.blame) == probe.want, (probe.source, probe.text, got.explanation)
    assert got.node is None, (probe.source, probe.text, got.node)
    if probe.want == CONSEQUENCE:
        # a consequence is a reading too: the error must not be passed over as unrecognised
        assert not got.explanation.startswith("No failure evidence"), probe.text


def test_ssh_exit_255_is_the_node_only_while_the_remote_command_says_nothing_else() -> None:
    # pdsh's ssh module relays ssh's status; 255 is ssh's own error (host down, unreachable,
    # refused) unless the remote command itself exited -1: its own error line then decides
    exit255 = _pdsh_exit(255, "gpu-a-07", 0)
    alone = explain_text(exit255)
    assert (alone.category, alone.blame, alone.node) == ("node", "node", "gpu-a-07")
    assert alone.confidence < 0.5  # exit(-1) of the remote command relays as 255 too
    refused = "gpu-a-07: ssh: connect to host gpu-a-07 port 22: Connection refused\n" + exit255
    got = explain_text(refused)
    assert (got.category, got.blame, got.node) == ("node", "node", "gpu-a-07")
    for err, _, want in BESIDE[:3]:  # the remote rank's own error, relayed by pdsh
        got = explain_text(_relay([err], "gpu-a-07") + exit255)
        assert (got.category, got.blame, got.node) == (*want, "gpu-a-07"), err
    # other statuses and other pdsh modules keep the remote command's reading
    for line in (_pdsh_exit(1, "gpu-a-07", 0), exit255.replace(" ssh ", " rsh ")):
        assert (explain_text(line).category, explain_text(line).blame) == USER, line


def test_a_launchers_negative_exit_decodes_only_for_the_standard_signals() -> None:
    # sys.exit(-N) leaves 256 - N; 255 stays a status (ssh's own failure, or exit(-1))
    assert decode(247, mod256=True) == (9, None)
    assert decode(241, mod256=True) == (15, None)
    assert decode(255, mod256=True) == (None, 255)
    assert decode(200, mod256=True) == (None, 200)
    assert decode(247) == (None, 247)


# openssh-portable sshconnect.c ssh_connect_direct: error("ssh: connect to host %s port %s: %s",
# host, strport, errno == 0 ? "failure" : strerror(errno)); ssh then exits 255
@pytest.mark.parametrize(
    "why",
    ["Connection refused", "Connection timed out", "No route to host", "Network is unreachable"],
)
@pytest.mark.parametrize(("host", "port"), [("gpu-a-07", 22), ("10.0.3.17", 2222)])
def test_ssh_that_cannot_reach_a_node_names_that_node(why: str, host: str, port: int) -> None:
    got = explain_text(f"ssh: connect to host {host} port {port}: {why}\n")
    assert (got.category, got.blame, got.node) == ("node", "node", host)


def test_ssh_reaching_a_node_is_not_a_fault() -> None:
    assert explain_text("debug1: Connecting to gpu-a-07 [10.0.3.17] port 22.\n").category is None
