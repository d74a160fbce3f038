"""Probe set sixteen (issue #11): how a host is attached to a line x failure lines.

Each convention is one way a delivering tool or emitter puts the node a line came from beside it,
built from that tool's own format (sources cited in correlator/explain/hosts_fields.py,
hosts_records.py, wrappers.py and collector/parse/delivery.py): syslog transports (RFC 5424,
"<PRI>" in front of RFC 3164 and rsyslog's ForwardFormat), journalctl's short-full / short-unix /
short-monotonic / short-delta / verbose / export / json-pretty modes, zsh's, fish's and SUSE's
default prompts, log shippers' JSON records (Fluent Bit, Vector, GELF, Filebeat's ECS, Splunk HEC),
Loki's logcli, PBS's `qstat -f`, LSF's job report, `hostnamectl`, a `hostname` typed at a prompt,
`uname -a`, a prompt's ssh or srun -w command, salloc's allocation, Slurm's environment, `kubectl
events`, `docker service logs`, Open MPI's help texts ("Local host:") and Alertmanager's
notification text. The failure line is read as it reads alone (its category and blame); the node is
the one the convention names, and none where the convention names a login node, a placeholder, a
masked name, a folded node set or several nodes.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from correlator.explain import explain_text
from correlator.explain.hosts import host_in_line
from tests.correlator.emitter_probe import HOSTS

# (failure line, syslog identifier of its emitter) with (category, blame) as the line alone reads
FAILURES: dict[str, tuple[str, str, tuple[str, str]]] = {
    "xid79": (
        "NVRM: Xid (PCI:0000:3b:00): 79, pid=12345, name=python, GPU has fallen off the bus.",
        "kernel",
        ("gpu_hardware", "node"),
    ),
    "ecc_dbe": (
        "NVRM: Xid (PCI:0000:b7:00): 48, pid=2231, name=python3, An uncorrectable double bit "
        "error (DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0.",
        "kernel",
        ("gpu_hardware", "node"),
    ),
    "cuda_illegal": (
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "python",
        ("user_code", "job"),
    ),
    "oom_kill": (
        "Out of memory: Killed process 48213 (python) total-vm:812345612kB, "
        "anon-rss:503316480kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:990000kB "
        "oom_score_adj:0",
        "kernel",
        ("oom_host", "job"),
    ),
    # ncclGetLastError's text as torch's "Last error:" quotes it, without NCCL's own prefix: an
    # IB work-completion error is pinned to the host that logged it
    "nccl_ib_wc": (
        "NET/IB : Got completion from peer 10.4.0.17<45678> with status=12 opcode=0 len=0 "
        "vendor err 129 (Recv)",
        "python",
        ("interconnect", "infra"),
    ),
    "stepd_oom": (
        "slurmstepd: error: Detected 1 oom_kill event in StepId=4711.0. Some of the step tasks "
        "have been OOM Killed.",
        "slurmstepd",
        ("oom_host", "job"),
    ),
}

Conv = Callable[[str, str, str], str]  # (host, failure line, identifier) -> the delivered text

CONVENTIONS: dict[str, Conv] = {
    "zsh_prompt": lambda h, line, tag: f"{h}% dmesg | tail -1\n{line}",
    "zsh_root_prompt": lambda h, line, tag: f"{h}# journalctl -k -n 1\n{line}",
    "fish_prompt": lambda h, line, tag: f"alice@{h} ~/train> python train.py\n{line}",
    "fish_status_prompt": lambda h, line, tag: f"alice@{h} ~/train [1]> dmesg\n{line}",
    # SUSE's bash prompt (openSUSE/aaa_base files/etc/bash.bashrc), a user's and root's
    "suse_prompt": lambda h, line, tag: f"alice@{h}:/scratch/run> python3 train.py\n{line}",
    "suse_root_prompt": lambda h, line, tag: f"{h}:~ # dmesg | tail -1\n{line}",
    "rfc5424": lambda h, line, tag: (
        f"<3>1 2024-03-01T10:00:00.123456+00:00 {h} {tag} 4711 - - {line}"
    ),
    "rfc5424_sd": lambda h, line, tag: (
        f'<11>1 2024-03-01T10:00:00Z {h} {tag} - ID47 [origin ip="10.0.0.7"] {line}'
    ),
    "rsyslog_forward": lambda h, line, tag: (
        f"<3>2024-03-01T10:00:00.123456+00:00 {h} {tag}: {line}"
    ),
    "rfc3164_pri": lambda h, line, tag: f"<3>Mar  1 10:00:00 {h} {tag}: {line}",
    "journal_short_full": lambda h, line, tag: (
        f"Fri 2024-03-01 10:00:00 UTC {h} {tag}[4711]: {line}"
    ),
    "journal_short_unix": lambda h, line, tag: f"1709287200.123456 {h} {tag}[4711]: {line}",
    "journal_short_monotonic": lambda h, line, tag: f"[ 4211.103317] {h} {tag}[4711]: {line}",
    "journal_short_delta": lambda h, line, tag: (
        f"[ 4211.103317 <    0.000123>] {h} {tag}[4711]: {line}"
    ),
    "journal_verbose": lambda h, line, tag: (
        "Fri 2024-03-01 10:00:00.123456 UTC [s=5a1c;i=1f;b=9e2d;m=fb;t=6129;x=77ab]\n"
        f"    _HOSTNAME={h}\n    SYSLOG_IDENTIFIER={tag}\n    MESSAGE={line}"
    ),
    "journal_export": lambda h, line, tag: (
        f"__CURSOR=s=5a1c;i=1f\n__REALTIME_TIMESTAMP=1709287200123456\n_HOSTNAME={h}\n"
        f"SYSLOG_IDENTIFIER={tag}\nMESSAGE={line}\n"
    ),
    "journal_json_pretty": lambda h, line, tag: json.dumps(
        {"__CURSOR": "s=5a1c;i=1f", "_HOSTNAME": h, "SYSLOG_IDENTIFIER": tag, "MESSAGE": line},
        indent=8,
        separators=(",", " : "),
    ),
    "fluentbit_hostname": lambda h, line, tag: json.dumps(
        {"date": 1709287200.1, "log": line, "hostname": h}
    ),
    "fluentbit_kubernetes": lambda h, line, tag: json.dumps(
        {
            "log": line + "\n",
            "stream": "stderr",
            "kubernetes": {"pod_name": "trainer-0", "namespace_name": "ml", "host": h},
        }
    ),
    "vector_host": lambda h, line, tag: json.dumps(
        {"host": h, "message": line, "source_type": "journald", "timestamp": "2024-03-01T10:00Z"}
    ),
    "gelf": lambda h, line, tag: json.dumps(
        {"version": "1.1", "host": h, "short_message": line, "level": 3}
    ),
    "filebeat_ecs": lambda h, line, tag: json.dumps(
        {
            "@timestamp": "2024-03-01T10:00:00.000Z",
            "message": line,
            "host": {"hostname": h, "name": h, "os": {"kernel": "5.15.0"}},
            "agent": {"type": "filebeat"},
        }
    ),
    "splunk_hec": lambda h, line, tag: json.dumps(
        {"time": 1709287200, "host": h, "sourcetype": "syslog", "event": line}
    ),
    "docker_service_logs": lambda h, line, tag: (
        f"trainer.1.x8k2m4q9zt1a@{h}    | starting epoch 3\ntrainer.1.x8k2m4q9zt1a@{h}    | {line}"
    ),
    "logcli": lambda h, line, tag: f'2024-03-01T10:00:00Z {{hostname="{h}", job="syslog"}} {line}',
    "qstat_exec_host": lambda h, line, tag: (
        f"Job Id: 4711.pbs01\n    job_state = R\n    exec_host = {h}/0*8\n{line}"
    ),
    "lsf_report": lambda h, line, tag: (
        "Job <4711> was submitted from host <login1> by user <alice> in cluster <c1>.\n"
        f"Job was executed on host(s) <8*{h}>, in queue <gpu>, as user <alice> in cluster "
        f"<c1>.\n{line}"
    ),
    "lsf_bjobs": lambda h, line, tag: (
        f"Fri Mar  1 10:00:00: Started 8 Task(s) on Host(s) <8*{h}>, Allocated 8 Slot(s)\n{line}"
    ),
    "hostnamectl": lambda h, line, tag: (
        f"$ hostnamectl\n   Static hostname: {h}\n         Icon name: computer-server\n{line}"
    ),
    "hostname_cmd": lambda h, line, tag: f"$ hostname\n{h}\n$ dmesg | tail -1\n{line}",
    "uname": lambda h, line, tag: (
        f"$ uname -a\nLinux {h} 5.15.0-105-generic #115-Ubuntu SMP Mon Apr 15 09:52:04 UTC "
        f"2024 x86_64 x86_64 x86_64 GNU/Linux\n{line}"
    ),
    "salloc": lambda h, line, tag: (
        "salloc: Granted job allocation 4711\nsalloc: Waiting for resource configuration\n"
        f"salloc: Nodes {h} are ready for job\n{line}"
    ),
    "slurmd_nodename": lambda h, line, tag: f"SLURM_JOB_ID=4711\nSLURMD_NODENAME={h}\n{line}",
    "slurm_job_nodelist": lambda h, line, tag: f"SLURM_JOB_ID=4711\nSLURM_JOB_NODELIST={h}\n{line}",
    "ssh_command": lambda h, line, tag: (
        f"[alice@login01 ~]$ ssh -p 2222 root@{h} 'dmesg | tail -1'\n{line}"
    ),
    "srun_nodelist": lambda h, line, tag: f"login01% srun -N1 --nodelist={h} python t.py\n{line}",
    "kubectl_events": lambda h, line, tag: (
        "NAMESPACE   LAST SEEN   TYPE      REASON     OBJECT          MESSAGE\n"
        f"default     2m          Warning   GPUError   Node/{h}   {line}"
    ),
    "open_mpi_local_host": lambda h, line, tag: (
        "WARNING: There is at least one non-excluded one OpenFabrics device found,\n"
        "but there are no active ports detected (or Open MPI was unable to use\n"
        "them).  This is most certainly not what you wanted.  Check your\n"
        "cables, subnet manager configuration, etc.  The openib BTL will be\n"
        f"ignored for this job.\n\n  Local host: {h}\n{'-' * 74}\n{line}"
    ),
    "alertmanager": lambda h, line, tag: (
        f"[FIRING:1] GPUError\nLabels:\n - alertname = GPUError\n - Hostname = {h}\n"
        f"Annotations:\n - description = {line}"
    ),
}


def _cells() -> list[object]:
    cells = []
    for i, conv in enumerate(CONVENTIONS):
        for j, failure in enumerate(FAILURES):
            for k in range(2):  # two host spellings a cell, every spelling used across the row
                host = HOSTS[(i + 2 * j + k) % len(HOSTS)]
                cells.append(pytest.param(conv, failure, host, id=f"{conv}-{failure}-{host}"))
    return cells


@pytest.mark.parametrize(("conv", "failure", "host"), _cells())
def test_the_convention_names_the_node_of_the_failure_line(
    conv: str, failure: str, host: str
) -> None:
    line, tag, want = FAILURES[failure]
    text = CONVENTIONS[conv](host, line, tag)
    got = explain_text(text)
    assert (got.category, got.blame) == want, (text, got.explanation)
    assert got.node == host, (text, got.node, got.explanation)


_X = FAILURES["xid79"][0]

# Texts whose convention names no node the failure can be pinned on.
NAMES_NONE = {
    "rfc5424_nil_host": f"<3>1 2024-03-01T10:00:00Z - kernel - - - {_X}",
    "pri_localhost": f"<3>Mar  1 10:00:00 localhost kernel: {_X}",
    # the kernel's own "[ 5.1] driver dev: " has journalctl short-monotonic's clock: no host
    "dmesg_usb_device": f"[    5.100000] usb 1-1: new high-speed USB device\n[ 4211.103317] {_X}",
    "dmesg_nvme_device": f"[    5.100000] nvme nvme0: pci function 0000:01:00.0\n[ 4211.1033] {_X}",
    "zsh_login_srun": f"login01% srun -N1 -w gpu-[07-08] dmesg\n{_X}",
    "zsh_word": f"Total% done\n{_X}",
    "fish_login_sinfo": f"alice@login01 ~> sinfo -R\n{_X}",
    "suse_login_sinfo": f"alice@login01:~> sinfo -R\n{_X}",
    "suse_root_login_squeue": f"login01:~ # squeue -u alice\n{_X}",
    "qstat_several": f"    exec_host = gpu-07/0*8+gpu-08/0*8\n{_X}",
    "lsf_several": (
        "Job was executed on host(s) <8*gpu-07> <8*gpu-08>, in queue <gpu>, as user <a> in "
        f"cluster <c>.\n{_X}"
    ),
    "salloc_folded_set": f"salloc: Nodes gpu[15,19] are ready for job\n{_X}",
    "slurm_nodelist_folded": f"SLURM_JOB_NODELIST=gpu-[07-08]\n{_X}",
    "srun_hostname_lists_every_node": f"$ srun -N2 hostname\ngpu-07\ngpu-08\n{_X}",
    "srun_two_nodes": f"$ srun -N2 -w gpu-07 dmesg\n{_X}",
    "srun_folded_nodelist": f"$ srun -w gpu-[07-08] dmesg\n{_X}",
    "ssh_to_two_nodes": (
        f"$ ssh gpu-07 dmesg\n{_X}\n$ ssh gpu-08 dmesg\n{_X.replace('12345', '7')}"
    ),
    "hostname_then_several": f"$ hostname\ngpu-07\ngpu-08\n{_X}",
    "json_placeholder_host": json.dumps({"host": "localhost", "message": _X}),
    "json_masked_host": json.dumps({"hostname": "xxxxxxxx", "log": _X}),
    "splunk_placeholder_host": json.dumps({"host": "unknown", "event": _X}),
    "ecs_masked_host": json.dumps({"message": _X, "host": {"hostname": "XXXXXXXX"}}),
    "docker_service_two_nodes": (
        f"trainer.1.x8k2m4q9zt1a@gpu-07    | {_X}\n"
        f"trainer.2.p3n7c1v5rw8e@gpu-08    | {_X.replace('12345', '7')}"
    ),
    "logcli_two_node_labels": f'2024-03-01T10:00:00Z {{host="gpu-07", node_name="gpu-08"}} {_X}',
    "alertmanager_instance_only": (
        f"[FIRING:1] GPUError\nLabels:\n - alertname = GPUError\n - instance = 10.0.0.7:9400\n"
        f"Annotations:\n - description = {_X}"
    ),
    "journal_export_two_hosts": (
        f"_HOSTNAME=gpu-07\nMESSAGE={_X}\n\n_HOSTNAME=gpu-08\nMESSAGE={_X.replace('12345', '7')}"
    ),
    "journal_json_pretty_two_hosts": "\n".join(
        json.dumps({"_HOSTNAME": h, "MESSAGE": _X.replace("12345", str(n))}, indent=8)
        for n, h in ((1, "gpu-07"), (2, "gpu-08"))
    ),
    "shipper_two_hosts": "\n".join(
        json.dumps({"host": h, "message": _X.replace("12345", str(n))})
        for n, h in ((1, "gpu-07"), (2, "gpu-08"))
    ),
}


@pytest.mark.parametrize("text", NAMES_NONE.values(), ids=NAMES_NONE.keys())
def test_a_convention_that_names_no_single_node_pins_none(text: str) -> None:
    got = explain_text(text)
    assert (got.category, got.blame) == ("gpu_hardware", "node"), got.explanation
    assert got.node is None, (text, got.node)


def test_alertmanager_subject_is_no_open_mpi_host() -> None:
    # "[FIRING:1] " has Open MPI's "[host:pid] " shape; the subject names no host
    got = explain_text(f"[FIRING:1] GPUError\n[ 4211.103317] {_X}")
    assert got.node is None, got.node


@pytest.mark.parametrize("host", HOSTS[:4])
def test_slurmctld_setting_a_node_inval_names_that_node(host: str) -> None:
    # SchedMD/slurm src/slurmctld/node_mgr.c validate_node_specs
    got = explain_text(
        f"slurmctld: error: Setting node {host} state to INVAL with reason:gres/gpu count "
        "reported lower than configured (4 < 8)"
    )
    assert (got.category, got.blame, got.node) == ("node", "node", host), got.explanation


# slurmstepd's own messages under its "slurmstepd-<NodeName>" argv0 (MULTIPLE_SLURMD), one line
_STEPD_LINES = (
    "error: Detected 1 oom_kill event in StepId=4711.0. Some of the step tasks have been OOM "
    "Killed.",
    "error: Job 4711 exceeded memory limit (8388608 > 8192000), being killed",
)


@pytest.mark.parametrize("host", HOSTS)
@pytest.mark.parametrize("line", _STEPD_LINES)
def test_one_slurmstepd_line_under_its_node_argv0_names_that_node(line: str, host: str) -> None:
    got = explain_text(f"slurmstepd-{host}: {line}")
    assert (got.category, got.blame, got.node) == ("oom_host", "job", host), got.explanation


@pytest.mark.parametrize(
    "record",
    [
        lambda h: json.dumps({"host": h, "message": _X}),
        lambda h: json.dumps({"_HOSTNAME": h, "MESSAGE": _X}),
        lambda h: json.dumps({"log": _X, "kubernetes": {"host": h}}),
    ],
    ids=["vector", "journal_json", "fluentbit_kubernetes"],
)
def test_one_message_delivered_from_two_hosts_names_neither(record: Callable[[str], str]) -> None:
    # the same line, word for word, from two nodes: several nodes show the fault
    got = explain_text(f"{record('gpu-07')}\n{record('gpu-08')}")
    assert (got.category, got.blame, got.node) == ("gpu_hardware", "node", None), got.node


# SUSE's prompt (openSUSE/aaa_base files/etc/bash.bashrc: "user@host:dir> ", root's
# "host:dir # "): the prompt names its host, and only the prompt; the command after it is a
# command, whatever hosts it names.
SUSE_PROMPT_LINES = {
    "user_absolute_dir": ("alice@nid002070:/scratch/pawsey/run> python3 train.py", "nid002070"),
    "user_home": ("alice@gpu-a-07:~> dmesg | tail", "gpu-a-07"),
    "root_home": ("nid002070:~ # journalctl -k -n 5", "nid002070"),
    "root_absolute_dir": ("dgx-h100-031:/root # nvidia-smi", "dgx-h100-031"),
    "scp_target_in_command": ("alice@login01:~> scp alice@gpu-07:/scratch/x.log .", "login01"),
    "root_form_in_command": ("alice@login01:~> echo gpu-07:/x # note", "login01"),
    "user_form_in_command": ("nid001234:~ # su - bob -c 'echo bob@gpu-07:~> x'", "nid001234"),
}


@pytest.mark.parametrize(("line", "host"), SUSE_PROMPT_LINES.values(), ids=SUSE_PROMPT_LINES)
def test_suse_prompt_names_its_own_host_not_the_commands(line: str, host: str) -> None:
    assert host_in_line(line) == host


# Lines with a piece of SUSE's prompt shape that are no prompt: markup, arrows, Python's
# prompt, a traceback's frame, mail addresses, scp/rsync arguments, URLs and path comments,
# a root form whose host has no digit, and a prompt with nothing typed at it.
NOT_SUSE_PROMPTS = {
    "markup": "<alice@gpu-07:/x> python t.py",
    "arrow": "alice@gpu-07:/data -> /backup",
    "arrow_glued": "alice@gpu-07:/data-> /backup",
    "fat_arrow_glued": "alice@gpu-07:/data=> /backup",
    "root_form_then_arrow": "gpu-07:/opt/x -> /opt/y # link",
    "python_prompt": ">>> import torch  # on gpu-07",
    "traceback_frame": '  File "/opt/app/train.py", line 12, in <module>',
    "mail_reply": "alice@gpu-07.example.com wrote:",
    "mail_header": "Reported-by: alice@gpu-07.example.com",
    "scp_command": "scp alice@gpu-07:/scratch/run.log .",
    "rsync_command": "rsync -av alice@gpu-07:/data/ /backup/ # nightly",
    "url_comment": "https://gpu07.example.com:/x # mirror",
    "double_slash": "server01://export # y",
    "fstab_line": "nfs01:/export /mnt nfs defaults 0 0",
    "wordy_root_form": "docs:/path # comment",
    "nothing_typed": "alice@gpu-07:~/runs> ",
}


@pytest.mark.parametrize("line", NOT_SUSE_PROMPTS.values(), ids=NOT_SUSE_PROMPTS)
def test_text_shaped_like_part_of_a_suse_prompt_names_no_host(line: str) -> None:
    assert host_in_line(line) is None


def test_a_dollar_typed_at_a_suse_prompt_does_not_make_it_a_bash_prompt() -> None:
    # bash's prompt stops at a ">": the login node's ssh names the node it ran on, not login01
    line = "alice@login01:~> ssh -t gpu-07 'echo $HOSTNAME; dmesg'"
    assert host_in_line(line) is None
    got = explain_text(f"{line}\n{_X}")
    assert (got.category, got.blame, got.node) == ("gpu_hardware", "node", "gpu-07")
