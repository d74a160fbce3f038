"""Round nineteen: Ray's lists of guessed causes stay guesses when a terminal's hard wrap cuts them
off from Ray's own line. The messages are Ray's own formats (ray-project/ray
src/ray/raylet/node_manager.cc DisconnectClient's unexpected worker exit, and the agent's
report_raylet_error_logs, as cited in correlator/rules/emitters/ray.json) with made-up values,
never a corpus case; each is cut every W characters as a terminal's copy mode does."""

from __future__ import annotations

import pytest

from correlator.explain import explain_text

_WORKER = (
    "(raylet) A worker died or was killed while executing a task by an unexpected system error. "
    "To troubleshoot the problem, check the logs for the dead worker. RayTask ID: "
    "ffffffffffffffff0a1b2c3d4e5f60718293a4b503000000 Worker ID: 5ed9f46ad3df8e98 Node ID: "
    "75786dfcc8e7bdbd Worker IP address: {ip} Worker port: 10230 Worker PID: 207258 Worker exit "
    "type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error "
    "code 2. End of file. There are some potential root causes. (1) The process is killed by "
    "SIGKILL by OOM killer due to high memory usage. (2) ray stop --force is called. (3) The "
    "worker is crashed unexpectedly due to SIGSEGV or other unexpected errors."
)
_RAYLET = (
    "2024-05-06 10:11:12,808\tWARNING worker.py:1849 -- Raylet is terminated: ip={ip}, "
    "id=6ad361c6d67a3180. Termination is unexpected. Possible reasons include: (1) SIGKILL by "
    "the user or system OOM killer, (2) Invalid memory access from Raylet causing SIGSEGV or "
    "SIGBUS, (3) Other termination signals. Last 20 lines of the Raylet logs:"
)
WIDTHS = (80, 100, 120, 132, 149, 160, 200)


def _cut(line: str, width: int) -> str:
    return "".join(line[i : i + width] + "\n" for i in range(0, len(line), width))


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("ip", ["10.0.1.75", "172.31.4.250"])
def test_a_dead_ray_workers_guessed_causes_stay_guesses_when_a_terminal_cuts_them(
    width: int, ip: str
) -> None:
    line = _WORKER.format(ip=ip)
    got = explain_text(_cut(line, width))
    # an address the cut splits may name no node (a piece is never taken for it): the
    # joined reading, where one is made, names the whole address
    start = line.index(ip)
    split = start // width != (start + len(ip) - 1) // width
    assert (got.category, got.blame) == ("oom_host", "unknown")
    assert got.node == ip or (split and got.node is None), got.node


@pytest.mark.parametrize("width", WIDTHS)
def test_a_terminated_raylets_guessed_causes_stay_guesses_when_a_terminal_cuts_them(
    width: int,
) -> None:
    got = explain_text(_cut(_RAYLET.format(ip="10.40.7.21"), width))
    assert (got.category, got.blame, got.node) == ("node", "node", "10.40.7.21")


@pytest.mark.parametrize(
    ("line", "want"),
    [
        # the kernel's own kill and a program's own crash are still read as what they are
        (
            "Aug 18 03:19:11 gpu-a-07 kernel: python invoked oom-killer: gfp_mask=0x100cca",
            "oom_host",
        ),
        ("Memory cgroup out of memory: Killed process 7748 (python)", "oom_host"),
        (
            "/var/spool/slurmd/job01/slurm_script: line 9: 7748 Segmentation fault (core dumped)",
            "user_code",
        ),
        ("Fatal Python error: Segmentation fault", "user_code"),
        (
            "*** SIGSEGV (@0x0) received by PID 7748 (TID 0x7f) from PID 0; stack trace: ***",
            "user_code",
        ),
    ],
)
def test_an_oom_kill_or_a_crash_outside_rays_guesses_is_still_read(line: str, want: str) -> None:
    assert explain_text(line + "\n").category == want
