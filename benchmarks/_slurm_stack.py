"""The whole healing path for real, on one machine: a real Slurm 22.05 cluster (3 nodes x 8
fake GPUs, Slurm's default timing), a real `fleetmedic serve` process (Slurm and W&B sources,
correlator, healer) and one real `fleetmedic agent` per node whose kernel-log source follows a
log file (the file fallback of collector/kmsg.py). We cannot break a GPU here, so a fault is a
real-format Xid line appended to a node's file.

Used by tests/healer/test_slurm_e2e.py and `fleetmedic bench recovery`. The Slurm commands the
server runs go through logging wrappers (`calls()`), which can also pause after a command so a
test can SIGKILL the server mid-action. Needs root and the repository's tests/ (cluster.sh).
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import httpx

from benchmarks._procs import free_port

REPO = Path(__file__).resolve().parents[1]
CLUSTER_SH = REPO / "tests" / "collector" / "slurm" / "cluster.sh"
TRAIN = Path(__file__).with_name("_train.py")
NODES = ("node1", "node2", "node3")
COMMANDS = ("scontrol", "sbatch", "squeue", "sacct", "scancel")
T = TypeVar("T")
_WRAPPER = """#!/bin/bash
# Logs each call, runs the real command, and pauses after it when a test asked to.
echo "$(date +%s.%N) {name} $*" >> "{dir}/calls.log"
"{real}" "$@"
rc=$?
if [ -e "{dir}/pause-{name}-$1" ]; then echo $$ > "{dir}/paused-{name}-$1"; exec sleep 60; fi
exit $rc
"""


def wait_for(pred: Callable[[], T], what: str, timeout: float = 60.0, every: float = 0.05) -> T:
    """Poll until pred() is truthy and return it; AssertionError naming `what` otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:.0f} s: {what}")
        time.sleep(every)


def start_cluster(timing: str = "default") -> tuple[Path, str]:
    """Start a throwaway cluster with cluster.sh; (its directory, SLURM_CONF)."""
    root = Path(tempfile.mkdtemp(prefix="fm-heal-slurm-"))
    env = dict(os.environ, FLEETMEDIC_SLURM_TIMING=timing)
    proc = subprocess.run(
        ["bash", str(CLUSTER_SH), "start", str(root)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env=env,
    )
    if proc.returncode != 0:
        subprocess.run(["bash", str(CLUSTER_SH), "stop", str(root)], timeout=120, check=False)
        raise RuntimeError(f"cluster.sh start failed ({proc.returncode}):\n{proc.stderr}")
    return root, str(root / "etc" / "slurm.conf")


def stop_cluster(root: Path) -> None:
    """Tear the cluster down and remove its directory."""
    subprocess.run(["bash", str(CLUSTER_SH), "stop", str(root)], timeout=120, check=False)


class Stack:
    """A server and per-node agents on a running cluster; see the module doc."""

    def __init__(self, work: Path, *, cluster_root: Path, slurm_conf: str, policy: str) -> None:
        self.work = work
        self.cluster_root = cluster_root
        self.slurm_conf = slurm_conf
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.token, self.admin = secrets.token_hex(12), secrets.token_hex(12)
        self.wandb_dir = work / "wandb"
        self.bin_dir = work / "bin"
        self.policy_path = work / "policy.toml"
        self.server: subprocess.Popen[bytes] | None = None
        self.agents: dict[str, subprocess.Popen[bytes]] = {}
        self.kern = {n: work / f"kern-{n}.log" for n in NODES}
        for d in (self.wandb_dir, self.bin_dir, work / "jobs"):
            d.mkdir(parents=True, exist_ok=True)
        for path in self.kern.values():
            path.touch()
        self.set_policy(policy)
        self._wrappers()

    # --- processes ---

    def _wrappers(self) -> None:
        for name in COMMANDS:
            real = shutil.which(name) or f"/usr/bin/{name}"
            path = self.bin_dir / name
            path.write_text(_WRAPPER.format(name=name, dir=self.bin_dir, real=real))
            path.chmod(0o755)

    def env(self) -> dict[str, str]:
        """The server's environment (resubmitted jobs inherit it through --export=ALL)."""
        return dict(
            os.environ,
            SLURM_CONF=self.slurm_conf,
            WANDB_MODE="offline",
            WANDB_DIR=str(self.wandb_dir),
            WANDB_SILENT="true",
            FLEETMEDIC_DATABASE_URL=f"sqlite:///{self.work / 'server.db'}",
            FLEETMEDIC_DATA_DIR=str(self.work / "data"),
            FLEETMEDIC_AGENT_TOKENS=self.token,
            FLEETMEDIC_API_TOKENS=f"admin:tester:{self.admin}",
            FLEETMEDIC_SLURM_ENABLED="1",
            FLEETMEDIC_SLURM_CLUSTER="fmtest",
            FLEETMEDIC_SLURM_POLL_S="1",
            FLEETMEDIC_SLURM_CONF=self.slurm_conf,
            FLEETMEDIC_SLURM_BIN_DIR=str(self.bin_dir),
            FLEETMEDIC_WANDB_ENABLED="1",
            FLEETMEDIC_WANDB_DIRS=str(self.wandb_dir),
            FLEETMEDIC_WANDB_INTERVAL_S="1",
            FLEETMEDIC_HEALER_POLICY_FILE=str(self.policy_path),
            FLEETMEDIC_HEALER_INTERVAL_S="1",
            FLEETMEDIC_LOG_LEVEL="INFO",
        )

    def start_server(self) -> None:
        """Start `fleetmedic serve` and wait until it answers."""
        log = (self.work / "server.log").open("ab")
        argv = [
            sys.executable,
            "-m",
            "web.cli",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
        ]
        self.server = subprocess.Popen(argv, cwd=REPO, env=self.env(), stdout=log, stderr=log)
        wait_for(self._healthy, "the server answers /healthz", timeout=90)

    def _healthy(self) -> bool:
        with contextlib.suppress(httpx.HTTPError):
            return httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200
        return False

    def kill_server(self, sig: int = signal.SIGKILL) -> None:
        """Stop the server (SIGKILL: as a crash would)."""
        if self.server is not None:
            self.server.send_signal(sig)
            self.server.wait(timeout=30)
            self.server = None

    def start_agent(self, node: str) -> None:
        """A `fleetmedic agent` for one node, following its kernel-log file."""
        env = dict(
            os.environ,
            FLEETMEDIC_AGENT_KMSG_PATH=str(self.work / "no-kmsg"),  # unreadable: use the file
            FLEETMEDIC_AGENT_KMSG_FALLBACK_FILE=str(self.kern[node]),
            FLEETMEDIC_DATA_DIR=str(self.work / f"agent-{node}"),
        )
        log = (self.work / f"agent-{node}.log").open("ab")
        argv = [
            sys.executable,
            "-m",
            "web.cli",
            "agent",
            "--server",
            self.url,
            "--token",
            self.token,
            "--node",
            node,
            "--source",
            "kmsg",
        ]
        self.agents[node] = subprocess.Popen(argv, cwd=REPO, env=env, stdout=log, stderr=log)

    def start(self) -> Stack:
        """Server, then one agent per node; returns once every agent follows its file."""
        self.start_server()
        for node in NODES:
            self.start_agent(node)
        for node in NODES:
            wait_for(self._agent_ready(node), f"agent of {node} started", timeout=90, every=0.2)
        return self

    def _agent_ready(self, node: str) -> Callable[[], bool]:
        log = self.work / f"agent-{node}.log"
        return lambda: "agent started" in log.read_text(errors="replace")

    def stop(self) -> None:
        """Stop the agents and the server (SIGTERM: a clean shutdown)."""
        for proc in self.agents.values():
            proc.terminate()
        for proc in self.agents.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=20)
        self.agents.clear()
        if self.server is not None:
            self.kill_server(signal.SIGTERM)

    def set_policy(self, text: str) -> None:
        """Write the healer's policy file (the server re-reads it when it changes)."""
        tmp = self.policy_path.with_suffix(".tmp")
        tmp.write_text(text)
        os.replace(tmp, self.policy_path)

    # --- the cluster ---

    def slurm(self, *argv: str, check: bool = True) -> str:
        """A Slurm client command against the cluster (as a person or the test runs it)."""
        proc = subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            timeout=30,
            env=dict(os.environ, SLURM_CONF=self.slurm_conf),
            check=False,
        )
        if check and proc.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} -> {proc.returncode}: {proc.stderr.strip()}")
        return proc.stdout.strip()

    def sbatch(self, name: str, *args: str, script: str) -> str:
        """Submit a batch script; returns the job id."""
        path = self.work / "jobs" / f"{name}.sh"
        path.write_text(script)
        out = self.slurm(
            "sbatch",
            "--parsable",
            f"--chdir={self.work / 'jobs'}",
            "-J",
            name,
            f"--output={self.work / 'jobs'}/%x-%j.out",
            *args,
            str(path),
        )
        return out.split(";")[0]

    def train_script(self, ckpt_dir: Path, *, export_dir: bool = False, **opts: Any) -> str:
        """The batch script of a checkpointing training job."""
        flags = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in opts.items() if v is not True)
        flags += "".join(f" --{k.replace('_', '-')}" for k, v in opts.items() if v is True)
        lines = ["#!/bin/bash"]
        if export_dir:  # the checkpoint directory named in the script, for the healer to read
            lines.append(f"export FLEETMEDIC_CHECKPOINT_DIR={ckpt_dir}")
        lines += [
            f"export WANDB_MODE=offline WANDB_DIR={self.wandb_dir} WANDB_SILENT=true",
            f"exec {sys.executable} {TRAIN} --ckpt-dir {ckpt_dir} {flags}",
        ]
        return "\n".join(lines) + "\n"

    def job(self, job_id: str) -> dict[str, str]:
        """`scontrol show job` fields of a job ({} once purged)."""
        out = self.slurm("scontrol", "-o", "show", "job", job_id, check=False)
        return dict(re.findall(r"(\S+?)=(\S*)", out))

    def node(self, name: str) -> tuple[str, str]:
        """(State, Reason) of a node as `scontrol show node` prints them."""
        out = self.slurm("scontrol", "show", "node", name)
        state = re.search(r"State=(\S+)", out)
        reason = re.search(r"Reason=(.*)$", out, re.M)
        return (state.group(1) if state else "", reason.group(1).strip() if reason else "")

    def output(self, name: str, job_id: str) -> str:
        """A job's output file so far."""
        path = self.work / "jobs" / f"{name}-{job_id}.out"
        return path.read_text(errors="replace") if path.exists() else ""

    def reset(self) -> None:
        """No jobs left, every node back in service (as a person would)."""
        self.slurm("scancel", "--full", "--user=root", check=False)
        wait_for(
            lambda: not self.slurm("squeue", "-h", "-o", "%i", check=False),
            "every job gone",
            timeout=60,
        )
        for n in NODES:
            self.slurm("scontrol", "update", f"nodename={n}", "state=resume", check=False)
        wait_for(lambda: all("DRAIN" not in self.node(n)[0] for n in NODES), "nodes resumed")

    # --- faults, calls, API ---

    def xid(self, node: str, code: int, bus: str) -> float:
        """Append a real-format NVRM Xid line to the node's kernel log; the time written."""
        ts = time.time()
        stamp = datetime.fromtimestamp(ts, UTC).isoformat(timespec="microseconds")
        text = {
            79: "GPU has fallen off the bus.",
            31: (
                "channel 0x0000000a, intr 00000000. MMU Fault: ENGINE GRAPHICS GPC1 "
                "GPCCLIENT_T1_4 faulted @ 0xdea_d0000000. Fault is of type FAULT_PDE "
                "ACCESS_TYPE_VIRT_WRITE"
            ),
        }[code]
        line = f"{stamp} vm kernel: NVRM: Xid (PCI:{bus}): {code}, pid=4242, name=python3, {text}"
        with self.kern[node].open("a") as f:
            f.write(line + "\n")
        return ts

    def calls(self, pattern: str) -> list[str]:
        """Logged calls of the server's Slurm commands matching a regex."""
        log = self.bin_dir / "calls.log"
        lines = log.read_text().splitlines() if log.exists() else []
        return [line for line in lines if re.search(pattern, line)]

    def api(self, path: str, method: str = "GET") -> Any:
        """The server's API as an admin."""
        r = httpx.request(
            method,
            f"{self.url}{path}",
            timeout=10,
            headers={"Authorization": f"Bearer {self.admin}"},
        )
        r.raise_for_status()
        return r.json()

    def known_running(self, job_id: str) -> bool:
        """The server has stored the job as running (its allocations come with it)."""
        try:
            job = self.api(f"/api/v1/jobs/{job_id}")
        except httpx.HTTPError:
            return False
        return bool(job.get("state") == "RUNNING")

    def actions(self, **filters: Any) -> list[dict[str, Any]]:
        """The healer's actions (newest first), filtered like the API."""
        query = "&".join(f"{k}={v}" for k, v in filters.items())
        return list(self.api(f"/api/v1/actions?{query}"))

    def dump(self) -> str:
        """What a failing test should show: actions, job outputs, the server log's tail."""
        try:
            acts = "\n".join(
                f"{a['id']} {a['kind']} {a['state']} job={a['job_id']} node={a['node']} "
                f"error={a['error']} result={a['result']} phase={a['params'].get('phase')}"
                for a in self.actions()
            )
        except Exception as exc:  # the server may be the thing that broke
            acts = f"(actions unavailable: {exc})"
        outs = "\n".join(
            f"--- {p.name}: {p.read_text(errors='replace')[-400:]!r}"
            for p in sorted((self.work / "jobs").glob("*.out"))
        )
        log = self.work / "server.log"
        lines = log.read_text(errors="replace").splitlines() if log.exists() else []
        tail = "\n".join([x for x in lines if "apscheduler" not in x][-40:])
        return f"actions:\n{acts}\njob outputs:\n{outs}\nserver log tail:\n{tail}"
