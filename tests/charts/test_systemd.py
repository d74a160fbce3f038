"""The systemd units for Slurm sites verify with systemd's own checker, are hardened, and read
their settings from environment files that name real settings."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.charts.chart import ROOT
from tests.conftest import missing
from timeline.settings import Settings

UNITS = ROOT / "charts" / "systemd"
AGENT, SERVER = "fleetmedic-agent.service", "fleetmedic-server.service"


def _systemd_analyze() -> str:
    path = shutil.which("systemd-analyze")
    if path is None:
        missing("REQUIRE_SYSTEMD", "no systemd-analyze: tests/system_deps.sh installs systemd")
    return path


def _directives(unit: str) -> dict[str, list[str]]:
    """Key -> every value it is given, across sections (systemd allows repeats)."""
    out: dict[str, list[str]] = {}
    for raw in (UNITS / unit).read_text().splitlines():
        line = raw.strip()
        if line and not line.startswith(("#", ";", "[")):
            key, _, value = line.partition("=")
            out.setdefault(key.strip(), []).append(value.strip())
    return out


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A file-system root with systemd's own units, ours, and the programs they start."""
    _systemd_analyze()
    base = tmp_path_factory.mktemp("root")
    system = next(p for p in (Path("/usr/lib/systemd/system"), Path("/lib/systemd/system")))
    shutil.copytree(system, base / "usr/lib/systemd/system", symlinks=True)
    (base / "etc/systemd/system").mkdir(parents=True)
    for unit in (AGENT, SERVER):
        shutil.copy(UNITS / unit, base / "etc/systemd/system" / unit)
        d = _directives(unit)
        for command in d.get("ExecStart", []) + d.get("ExecStartPre", []):
            program = base / command.split()[0].lstrip("/")
            program.parent.mkdir(parents=True, exist_ok=True)
            program.write_text("#!/bin/sh\n")
            program.chmod(0o755)
    return base


@pytest.mark.parametrize("unit", [AGENT, SERVER])
def test_unit_verifies_with_no_warning(root: Path, unit: str) -> None:
    cmd = [_systemd_analyze(), "verify", f"--root={root}", "--man=no", unit]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and done.stderr == "" and done.stdout == "", done.stderr


@pytest.mark.parametrize(("unit", "threshold"), [(AGENT, 3.0), (SERVER, 2.0)])
def test_units_exposure_scores_stay_low(root: Path, unit: str, threshold: float) -> None:
    # systemd's own score of the sandboxing (0 = locked down, 10 = fully exposed); measured with
    # systemd 252: 2.5 for the agent (it needs /dev/kmsg, /dev/nvidia* and every process's
    # /proc) and 1.7 for the server. --threshold takes tenths.
    cmd = [_systemd_analyze(), "security", "--offline=true", f"--root={root}",
           f"--threshold={round(threshold * 10)}", "--no-pager", unit]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr


def test_the_agent_gets_only_the_capability_reading_kmsg_needs() -> None:
    d = _directives(AGENT)
    assert d["AmbientCapabilities"] == ["CAP_SYSLOG"] == d["CapabilityBoundingSet"]
    assert d["NoNewPrivileges"] == ["yes"] and d["ProtectSystem"] == ["strict"]
    assert d["User"] != ["root"]
    # These would hide what it reads: /dev/kmsg, /dev/nvidia*, other users' /proc/PID.
    for key in ("ProtectKernelLogs", "PrivateDevices", "ProtectProc", "DevicePolicy"):
        assert key not in d, key
    assert d["Environment"] == ["FLEETMEDIC_DATA_DIR=/var/lib/fleetmedic-agent"]
    assert d["StateDirectory"] == ["fleetmedic-agent"]  # the spool's folder is its data dir


def test_the_server_gets_no_capability_at_all() -> None:
    d = _directives(SERVER)
    assert d["CapabilityBoundingSet"] == [""] and d["AmbientCapabilities"] == [""]
    assert d["NoNewPrivileges"] == ["yes"] and d["ProtectSystem"] == ["strict"]
    assert d["PrivateDevices"] == ["yes"] and d["ProtectKernelLogs"] == ["yes"]
    assert d["ExecStart"] == ["/opt/fleetmedic/bin/fleetmedic serve --no-upgrade"]
    assert d["ExecStartPre"][0].endswith("db upgrade --wait 300")


@pytest.mark.parametrize(("unit", "env_file"), [(AGENT, "agent.env"), (SERVER, "server.env")])
def test_environment_files_set_real_settings(unit: str, env_file: str) -> None:
    assert _directives(unit)["EnvironmentFile"] == [f"/etc/fleetmedic/{env_file}"]
    fields = set(Settings.model_fields)
    names = [
        line.split("=", 1)[0]
        for line in (UNITS / env_file).read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert names and all(n.startswith("FLEETMEDIC_") for n in names)
    assert {n.removeprefix("FLEETMEDIC_").lower() for n in names} <= fields
    if env_file == "agent.env":  # what the agent cannot start without
        assert {"FLEETMEDIC_AGENT_SERVER_URL", "FLEETMEDIC_AGENT_TOKEN"} <= set(names)
