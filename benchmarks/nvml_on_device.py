"""`fleetmedic bench nvml_on_device --json`: the NVML source checked on a real GPU node.

Measures CPU microseconds per GPU per hot sample of collector.nvml.NvmlSource against
`nvidia-smi --query-gpu` for the same fields in the same run, the RSS of a real `fleetmedic
agent` process, and (unless --no-fault) provokes a harmless MMU fault (Xid 31) to check that
the NVML event thread and the kernel log both report it. Writes what it read under $OUT (or
--out) as fixtures. `--fake` runs the same logic against collector.fakenvml: its figures are
labelled fake and are NOT H100 numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from collector.base import Observations
from collector.nvml import NvmlSource
from collector.nvml_events import NvmlEventSource

SMI_FIELDS = (
    "utilization.gpu,utilization.memory,memory.used,memory.total,power.draw,temperature.gpu,"
    "temperature.memory,clocks.sm,clocks_event_reasons.active,uuid,pci.bus_id,serial,name"
)
ROOT = Path(__file__).resolve().parents[1]


def _args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="fleetmedic bench nvml_on_device")
    p.add_argument("--fake", action="store_true", help="recorded-H100 fake NVML (figures: fake)")
    p.add_argument("--fake-gpus", type=int, default=1)
    p.add_argument("--samples", type=int, default=5000, help="hot sweeps to time")
    p.add_argument("--smi-runs", type=int, default=20)
    p.add_argument("--agent-seconds", type=float, default=6.0, help="0 skips the RSS check")
    p.add_argument("--no-fault", action="store_true", help="do not provoke the Xid 31")
    p.add_argument("--fault-wait", type=float, default=20.0)
    p.add_argument("--out", default=os.environ.get("OUT"), help="fixture folder (default $OUT)")
    return p.parse_args(argv)


def _nvml(args: argparse.Namespace) -> Any:
    if args.fake:
        from collector.fakenvml import FakeNvml

        return FakeNvml(gpus=args.fake_gpus)
    import pynvml

    return pynvml


def time_hot_samples(src: NvmlSource, sweeps: int) -> tuple[float, float, list[Any]]:
    """(CPU us per GPU per hot sample, wall us per GPU per hot sample, the last sweep)."""
    gpus = [g for g in src.gpus if not g.lost]
    for g in gpus:  # warm up: NotSupported getters get remembered, as in steady state
        src.hot_sample(g, time.time())
    cpu0, wall0 = time.process_time(), time.perf_counter()
    last: list[Any] = []
    for _ in range(sweeps):
        now = time.time()
        last = [src.hot_sample(g, now) for g in gpus]
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    n = max(sweeps * len(gpus), 1)
    return cpu / n * 1e6, wall / n * 1e6, last


def time_getters(src: NvmlSource, repeat: int = 200) -> dict[str, float]:
    """Median wall us of each hot getter on GPU 0 (to see what dominates a hot sample)."""
    nv = src.nvml
    if not src.gpus:
        return {}
    h = src.gpus[0].handle
    calls = {
        "util": lambda: nv.nvmlDeviceGetUtilizationRates(h),
        "mem": lambda: nv.nvmlDeviceGetMemoryInfo(h),
        "power": lambda: nv.nvmlDeviceGetPowerUsage(h),
        "temp": lambda: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU),
        "sm_clock": lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM),
        "clock_event_reasons": lambda: nv.nvmlDeviceGetCurrentClocksEventReasons(h),
        "mem_temp_field": lambda: nv.nvmlDeviceGetFieldValues(h, [nv.NVML_FI_DEV_MEMORY_TEMP]),
    }
    out: dict[str, float] = {}
    for name, fn in calls.items():
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            try:
                fn()
            except Exception:
                out[name] = -1.0  # raised (e.g. NotSupported): not part of the steady state
                break
            times.append((time.perf_counter() - t0) * 1e6)
        else:
            out[name] = round(statistics.median(times), 2)
    return out


def time_nvidia_smi(runs: int, out: Path | None) -> float | None:
    """Median wall ms of one `nvidia-smi --query-gpu` for the same fields; None without it."""
    exe = shutil.which("nvidia-smi")
    if exe is None or runs <= 0:
        return None
    cmd = [exe, f"--query-gpu={SMI_FIELDS}", "--format=csv,noheader,nounits"]
    times, text = [], ""
    for _ in range(runs):
        t0 = time.perf_counter()
        text = subprocess.run(cmd, capture_output=True, text=True, check=False).stdout
        times.append((time.perf_counter() - t0) * 1000)
    if out is not None:
        (out / "nvidia_smi_query.csv").write_text(f"# {' '.join(cmd)}\n{text}")
        q = subprocess.run([exe, "-q", "-x"], capture_output=True, text=True, check=False)
        (out / "nvidia-smi-q.xml").write_text(q.stdout)
    return statistics.median(times)


def agent_rss_mb(args: argparse.Namespace, seconds: float) -> float | None:
    """Peak RSS of a real `fleetmedic agent` (NVML source, server unreachable so it spools)."""
    if seconds <= 0:
        return None
    import psutil

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there: delivery retries, spool grows
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "web.cli", "agent", "--server", f"http://127.0.0.1:{port}"]
        cmd += ["--interval", "1", "--spool", f"{tmp}/spool.db", "--node", "bench"]
        if args.fake:
            cmd += ["--fake-nvml", "--fake-gpus", str(args.fake_gpus)]
        env = {**os.environ, "FLEETMEDIC_AGENT_TOKEN": "bench", "FLEETMEDIC_DATA_DIR": tmp}
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stderr=subprocess.DEVNULL)
        peak = 0
        deadline = time.monotonic() + seconds
        try:
            while time.monotonic() < deadline and proc.poll() is None:
                peak = max(peak, psutil.Process(proc.pid).memory_info().rss)
                time.sleep(0.2)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    return peak / 2**20 if peak else None


class EventWatch:
    """The NVML event thread and the kernel-log source, running and collecting events."""

    def __init__(self, nvml: Any, node: str, with_kmsg: bool) -> None:
        self.stop = threading.Event()
        self.nvml_events: list[Any] = []
        self.kmsg_events: list[Any] = []
        self.nvml_src = NvmlEventSource(nvml, node=node, wait_ms=200)
        self.kmsg_note = "not run"
        threads: list[tuple[Any, list[Any]]] = [(self.nvml_src, self.nvml_events)]
        if with_kmsg:
            try:
                from collector.kmsg import KmsgSource

                with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as fh:
                    state = Path(fh.name)
                state.unlink()
                threads.append((KmsgSource(node=node, state_path=state), self.kmsg_events))
                self.kmsg_note = "collector.kmsg.KmsgSource on /dev/kmsg"
            except ImportError as exc:
                self.kmsg_note = f"collector.kmsg unavailable: {exc}"
        for src, sink in threads:
            emit = self._sink(sink)
            threading.Thread(target=src.run, args=(emit, self.stop), daemon=True).start()
        self.nvml_src.ready.wait(10)

    @staticmethod
    def _sink(sink: list[Any]) -> Any:
        return lambda obs: sink.extend(obs.events) if isinstance(obs, Observations) else None

    def xid(self, events: list[Any], code: int, since: float) -> Any:
        """The first Xid event with this code seen since a time."""
        return next(
            (e for e in events if e.code == code and e.kind == "xid" and e.ts >= since - 5), None
        )


def provoke_fault(args: argparse.Namespace, nvml: Any, out: Path | None) -> str:
    """Run the wild-write kernel in a child process (or queue the recorded Xids when fake)."""
    if args.fake:
        nvml.queue_recorded_xids(0)
        return "fake: queued the recorded NVML Xid 31/43 events (no kernel log line)"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks._mmu_fault"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    text = f"rc={proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    if out is not None:
        (out / "fault_stderr.txt").write_text(text)
    return text.strip()[-500:]


def run(argv: list[str]) -> dict[str, Any]:
    """Run the checks; return the figures (and what was checked)."""
    args = _args(argv)
    out = Path(args.out) if args.out else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    nvml = _nvml(args)
    node = socket.gethostname()
    src = NvmlSource(nvml, node=node, slow_every=1_000_000)
    first = src.collect()  # opens NVML; identity plus one full (hot + slow) sample
    cpu_us, wall_us, last = time_hot_samples(src, args.samples)
    smi_ms = time_nvidia_smi(0 if args.fake else args.smi_runs, out)
    n_gpus = max(len(src.gpus), 1)
    result: dict[str, Any] = {
        "us_per_gpu_hot_sample": round(cpu_us, 2),
        "nvidia_smi_ms": None if smi_ms is None else round(smi_ms, 2),
        # one nvidia-smi call reads every GPU; compare it with one hot sweep of every GPU
        "ratio": None if smi_ms is None else round(smi_ms * 1000 / (cpu_us * n_gpus), 1),
        "agent_rss_mb": None,
        "wall_us_per_gpu_hot_sample": round(wall_us, 2),
        "gpus": len(src.gpus),
        "device": first.gpus[0].name if first.gpus else None,
        "driver": first.gpus[0].driver_version if first.gpus else None,
        "fake": bool(args.fake),
        "figures": "FAKE NVML (recorded H100 values), not H100 measurements"
        if args.fake
        else "real NVML on this machine",
        "getter_median_us": time_getters(src),
        "unsupported_getters": sorted(f"{i}:{n}{a or ''}" for i, n, a in src.unsupported),
    }
    if not args.no_fault:
        result.update(check_fault(args, nvml, node, out))
    result["agent_rss_mb"] = agent_rss_mb(args, args.agent_seconds)
    if result["agent_rss_mb"] is not None:
        result["agent_rss_mb"] = round(result["agent_rss_mb"], 1)
    src.close()
    if out is not None:
        _save(out, first, last, result)
    return result


def check_fault(args: argparse.Namespace, nvml: Any, node: str, out: Path | None) -> dict[str, Any]:
    """Provoke Xid 31 and wait for it from NVML events and the kernel log."""
    watch = EventWatch(nvml, node, with_kmsg=not args.fake)
    since = time.time()
    fault_text = provoke_fault(args, nvml, out)
    deadline = time.monotonic() + args.fault_wait
    while time.monotonic() < deadline:
        if watch.xid(watch.nvml_events, 31, since) and (
            args.fake or watch.xid(watch.kmsg_events, 31, since)
        ):
            break
        time.sleep(0.2)
    watch.stop.set()
    nvml_xid, kmsg_xid = (
        watch.xid(watch.nvml_events, 31, since),
        watch.xid(watch.kmsg_events, 31, since),
    )
    if out is not None:
        for name, events in (
            ("nvml_events", watch.nvml_events),
            ("kmsg_events", watch.kmsg_events),
        ):
            lines = [e.model_dump_json() for e in events]
            (out / f"{name}.jsonl").write_text("\n".join(lines) + ("\n" if lines else ""))
    return {
        "fault": fault_text,
        "xid31_nvml_event": nvml_xid is not None,
        "xid31_nvml_latency_s": None if nvml_xid is None else round(nvml_xid.ts - since, 3),
        "xid31_kmsg_event": kmsg_xid is not None,
        "xid31_kmsg_raw": None if kmsg_xid is None else kmsg_xid.raw,
        "kmsg_reader": watch.kmsg_note,
    }


def _save(out: Path, first: Observations, last: list[Any], result: dict[str, Any]) -> None:
    (out / "nvml_identity.json").write_text(
        json.dumps([g.model_dump(mode="json") for g in first.gpus], indent=1)
    )
    rows = [s.model_dump_json(exclude_none=True) for s in [*first.samples, *last]]
    (out / "nvml_samples.jsonl").write_text("\n".join(rows) + "\n")
    (out / "result.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    print(json.dumps(run(sys.argv[1:])))
