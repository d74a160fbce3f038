"""Rebuilding a Slurm job's submission from `scontrol show job` for a resubmission, and the
checkpoint directory a job names in its comment or batch script.

Options given on sbatch's command line are not in the batch script (`#SBATCH` lines are, and
sbatch reads them again); slurmctld keeps what they asked for, so they are rebuilt from its
fields (shapes as Slurm 22.05 prints them, /work/shared/reference/slurm-22.05/).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

from collector.slurm.hostlist import HostlistError, expand_hostlist

MARKER = "fleetmedic-resubmit:"
_CKPT_KEYS = r"(?:FLEETMEDIC_CHECKPOINT_DIR|checkpoint_dir|ckpt_dir)"
_CKPT = re.compile(rf"(?:^|[\s;,]){_CKPT_KEYS}=(?P<v>\"[^\"]*\"|'[^']*'|[^\s;,]+)")
_SCRIPT_ENV = re.compile(
    rf"^\s*(?:export\s+)?{_CKPT_KEYS}=(?P<v>\"[^\"]*\"|'[^']*'|\S+)\s*(?:#.*)?$", re.M
)
_NULL = {"", "(null)", "None", "N/A"}


def resubmit_marker(cluster: str, job_id: str, action_id: int) -> str:
    """The tag a resubmission carries in its comment, so a crash after sbatch is recognised."""
    return f"{MARKER}{cluster}:{job_id}:{action_id}"


def _literal(value: str) -> str | None:
    value = value.strip().strip("\"'")
    if not value or "$" in value or "`" in value:
        return None  # a shell expression we cannot evaluate here
    return value


def checkpoint_hints(comment: str | None, script: str | None) -> list[tuple[str, str]]:
    """(source, directory) named by `--comment checkpoint_dir=...` or the batch script's
    `export FLEETMEDIC_CHECKPOINT_DIR=...` (literal paths only), in that order."""
    out: list[tuple[str, str]] = []
    for m in _CKPT.finditer(comment or ""):
        value = _literal(m.group("v"))
        if value:
            out.append(("comment", value))
    for m in _SCRIPT_ENV.finditer(script or ""):
        value = _literal(m.group("v"))
        if value:
            out.append(("batch_script", value))
    return out


def _field(fields: Mapping[str, str], key: str) -> str | None:
    value = (fields.get(key) or "").strip()
    return None if value in _NULL else value


def hosts(value: str | None) -> list[str]:
    """Node names of a Slurm hostlist ('node[1-3]'); none for empty or '(null)'."""
    if value is None or value.strip() in _NULL:
        return []
    try:
        return expand_hostlist(value)
    except HostlistError:
        return [value]


def _gres(value: str | None) -> list[str]:
    """'gres:gpu:2,gres:nic:1' -> ['gpu:2', 'nic:1'] (TresPer* fields)."""
    out = []
    for item in (value or "").split(","):
        item = item.strip()
        if item.startswith(("gres:", "gres/")):
            out.append(item[5:])
    return out


def _path_option(value: str | None, job_id: str) -> str | None:
    """StdOut/StdErr as given: the old job id in the file name (its last occurrence, never in
    the directories) becomes %j again, so the new job does not overwrite the old one's log."""
    if value is None:
        return None
    head, sep, name = value.rpartition("/")
    found = list(re.finditer(rf"(?<!\d){re.escape(job_id)}(?!\d)", name))
    if found:
        m = found[-1]
        name = name[: m.start()] + "%j" + name[m.end() :]
    return f"{head}{sep}{name}"


def _resources(fields: Mapping[str, str]) -> list[str]:
    args = []
    nodes = _field(fields, "NumNodes")
    if nodes:
        args.append(f"--nodes={nodes}")
    tasks = _field(fields, "NumTasks")
    if tasks and tasks != "0":
        args.append(f"--ntasks={tasks}")
    per_node = (_field(fields, "NtasksPerN:B:S:C") or "0").split(":")[0]
    if per_node not in ("0", "*", ""):
        args.append(f"--ntasks-per-node={per_node}")
    cpt = _field(fields, "CPUs/Task")
    if cpt and cpt != "1":
        args.append(f"--cpus-per-task={cpt}")
    for key, opt in (("MinMemoryNode", "--mem"), ("MinMemoryCPU", "--mem-per-cpu")):
        mem = _field(fields, key)
        if mem and mem != "0":
            args.append(f"{opt}={mem}")
    args += [f"--gres={g}" for g in _gres(fields.get("TresPerNode"))]
    args += [f"--gpus={g.split(':')[-1]}" for g in _gres(fields.get("TresPerJob")) if "gpu" in g]
    per_task = [g for g in _gres(fields.get("TresPerTask")) if "gpu" in g]
    args += [f"--gpus-per-task={g.split(':')[-1]}" for g in per_task]
    return args


def _identity(fields: Mapping[str, str], job_id: str, comment: str) -> list[str]:
    args = []
    for key, opt in (
        ("JobName", "--job-name"),
        ("Partition", "--partition"),
        ("Account", "--account"),
        ("QOS", "--qos"),
        ("Features", "--constraint"),
        ("Reservation", "--reservation"),
        ("Licenses", "--licenses"),
        ("WorkDir", "--chdir"),
    ):
        value = _field(fields, key)
        if value:
            args.append(f"{opt}={value}")
    limit = _field(fields, "TimeLimit")
    if limit and limit not in ("UNLIMITED", "Partition_Limit"):
        args.append(f"--time={limit}")
    for key, opt in (("StdOut", "--output"), ("StdErr", "--error")):
        path = _path_option(_field(fields, key), job_id)
        if path:
            args.append(f"{opt}={path}")
    stdin = _field(fields, "StdIn")
    if stdin and stdin != "/dev/null":
        args.append(f"--input={stdin}")
    args.append(f"--comment={comment}")
    args.append("--requeue" if fields.get("Requeue") == "1" else "--no-requeue")
    if fields.get("OverSubscribe") == "NO":
        args.append("--exclusive")
    return args


def _owner(fields: Mapping[str, str], as_root: bool) -> list[str]:
    """Submitting as root for another user: the job runs as its owner, never as root."""
    user = (_field(fields, "UserId") or "").split("(")[0]
    group = (_field(fields, "GroupId") or "").split("(")[0]
    if not as_root or not user or user == "root":
        return []
    return [f"--uid={user}"] + ([f"--gid={group}"] if group else [])


def sbatch_args(
    fields: Mapping[str, str],
    *,
    job_id: str,
    exclude: Iterable[str],
    env: Mapping[str, str],
    marker: str,
    as_root: bool | None = None,
) -> list[str]:
    """sbatch options that ask for what the old job asked for, minus the nodes we took out."""
    bad = set(exclude)
    old_comment = " ".join(
        w for w in (_field(fields, "Comment") or "").split() if not w.startswith(MARKER)
    )
    args = ["--parsable"]
    args += _identity(fields, job_id, f"{old_comment} {marker}".strip())
    args += _resources(fields)
    req = [n for n in hosts(_field(fields, "ReqNodeList")) if n not in bad]
    if req:
        args.append(f"--nodelist={','.join(req)}")
    exc = sorted(set(hosts(_field(fields, "ExcNodeList"))) | bad)
    if exc:
        args.append(f"--exclude={','.join(exc)}")
    # Values with commas cannot travel in --export; such a value is left out.
    extra = [f"{k}={v}" for k, v in env.items() if v and "," not in str(v)]
    args.append("--export=" + ",".join(["ALL", *extra]))
    args += _owner(fields, os.geteuid() == 0 if as_root is None else as_root)
    return args
