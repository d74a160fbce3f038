"""Probe set twenty-one: LBNL Node Health Check (NHC) failures, as NHC itself writes them.

Read from mej/nhc @9c4a38c0c9f4: `nhc` die() logs "ERROR:  $NAME:  Health check failed:  $*"
to its log file ("[$SECONDS] - " in front with TS=1), syslogs "Health check failed:  $*" under
the tag "$NAME[pid]" (logger -p daemon.err) and, for SGE, prints "$HOSTNAME:diagnosis:NHC: $*";
helpers/node-mark-offline echoes "`date` $0 $*" (its arguments: the host, then the note) and
"$0:  Marking $STATUS $HOSTNAME offline:  $LEADER $NOTE", then drains the node with
Reason="NHC: $NOTE" (scontrol) or `pbsnodes -o -N "NHC: $NOTE"`. Each check's message is
"$FUNCNAME:  ..." (scripts/lbnl_*.nhc, scripts/csc_nvidia_smi.nhc). Every message is tried
behind every prefix; a prefix that names a host must give that host as the node. Never a
corpus case.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from correlator.explain import explain_text

HOSTS = ("gpu-a-07", "node0123", "dgx-h100-031", "nid001234")
# (how NHC's output wraps a check's message, whether that output names the host)
_Wrap = Callable[[str, str], str]
WRAPS: tuple[tuple[str, _Wrap, bool], ...] = (
    ("logfile", lambda h, m: f"ERROR:  nhc:  Health check failed:  {m}\n", False),
    ("logfile_ts", lambda h, m: f"[17] - ERROR:  nhc:  Health check failed:  {m}\n", False),
    (
        "syslog",
        lambda h, m: f"Nov 29 09:12:01 {h} nhc[20345]: Health check failed:  {m}\n",
        True,
    ),
    (
        "mark_offline",
        lambda h, m: f"/usr/libexec/nhc/node-mark-offline:  Marking idle {h} offline:  NHC: {m}\n",
        True,
    ),
    (
        "mark_offline_args",
        lambda h, m: f"20240301 10:11:12 /usr/libexec/nhc/node-mark-offline {h} {m}\n",
        True,
    ),
    (
        "scontrol_reason",
        lambda h, m: (
            f"NodeName={h} Arch=x86_64 CoresPerSocket=32\n"
            "   CPUAlloc=0 CPUTot=64 CPULoad=0.51\n"
            "   State=IDLE+DRAIN ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A\n"
            f"   Reason=NHC: {m} [root@2024-03-01T10:11:12]\n"
        ),
        True,
    ),
    ("sge", lambda h, m: f"begin\n{h}:healthy:false\n{h}:diagnosis:NHC: {m}\nend\n", True),
)

GPU = ("gpu_hardware", "node")
NODE = ("node", "node")
# (key, the check's message as it dies with it, the verdict its meaning gives)
MESSAGES: tuple[tuple[str, str, tuple[str, str]], ...] = (
    # scripts/csc_nvidia_smi.nhc: nvidia-smi's return codes 15, 14, 8 (the GPU itself) ...
    (
        "nvsmi_off_bus",
        "check_nvsmi_healthmon:  nvidia-smi:  The GPU has fallen off the bus or has otherwise "
        "become inaccessible",
        GPU,
    ),
    ("nvsmi_inforom", "check_nvsmi_healthmon:  nvidia-smi:  InfoROM is corrupted", GPU),
    ("nvsmi_power", "check_nvsmi_healthmon:  /usr/bin/nvidia-smi:  Power cables not attached", GPU),
    # ... 9, 12, 10, >127 and the rest (the node's driver stack)
    ("nvsmi_driver", "check_nvsmi_healthmon:  nvidia-smi:  NVIDIA driver not loaded", NODE),
    (
        "nvsmi_nvml",
        "check_nvsmi_healthmon:  nvidia-smi:  NVML shared library could not be found",
        NODE,
    ),
    ("nvsmi_irq", "check_nvsmi_healthmon:  nvidia-smi:  Interrupt issue with a GPU", NODE),
    ("nvsmi_signal", "check_nvsmi_healthmon:  nvidia-smi:  Caught fatal signal 9", NODE),
    ("nvsmi_rc", "check_nvsmi_healthmon:  nvidia-smi:  Returned failure code 255", NODE),
    # scripts/lbnl_nv.nhc
    (
        "nv_healthmon_rc",
        "check_nv_healthmon:  /usr/bin/nvidia-healthmon returned failure code 3",
        NODE,
    ),
    ("nv_healthmon_signal", "check_nv_healthmon:  nvidia-healthmon caught fatal signal 11", NODE),
    # scripts/lbnl_hw.nhc
    (
        "hw_physmem",
        "check_hw_physmem:  Actual RAM size (263842140 kB) less than minimum allowed "
        "(527000000 kB).",
        NODE,
    ),
    (
        "hw_cpuinfo",
        "check_hw_cpuinfo:  Actual CPU core count (62) does not match expected (64).",
        NODE,
    ),
    (
        "hw_mcelog",
        "check_hw_mcelog:  MCEs detected - 12 UNcorrected memory errors detected (limit of 0/day).",
        NODE,
    ),
    ("hw_eth", "check_hw_eth:  Ethernet device ib0 not detected.", NODE),
    (
        "hw_ib_ofed",
        "check_hw_ib:  Version mismatch between kernel OFED drivers and userspace OFED libraries.",
        NODE,
    ),
    # an IB port not up on the node: as ibstat's port-down reads (interconnect/infra)
    (
        "hw_ib_port",
        "check_hw_ib:  No IB port mlx5_0:1 is ACTIVE (LinkUp 200 Gb/sec).",
        ("interconnect", "infra"),
    ),
    # scripts/lbnl_fs.nhc
    ("fs_mount", "check_fs_mount:  /scratch not mounted", NODE),
    (
        "fs_mount_src",
        "check_fs_mount:  /home mounted from nfs01:/export/home (should match nfs02:/export/home)",
        NODE,
    ),
    ("fs_free", "check_fs_free:  /tmp has only 1% free (1024kB), minimum is 3%", NODE),
    ("fs_used", "check_fs_used:  /var is 99% full (19GB), threshold is 98%", NODE),
    # scripts/lbnl_ps.nhc: a daemon the node needs is not running
    ("ps_daemon", "check_ps_daemon:  Process slurmd owned by root not running", NODE),
    # nhc: the watchdog could not end a hung NHC
    ("watchdog", "Watchdog timer unable to terminate hung NHC process 4242.", NODE),
)

# scripts/lbnl_ps.nhc nhc_ps_check_res: a user's process over a limit is the user's, never the
# node's ("Process \"$THIS_PROG\" ($THIS_PID) of ${PS_USER[...]} using ..."), and the
# unauthorized/rogue process of check_ps_unauth_users / check_ps_userproc_lineage likewise
USER_MESSAGES: tuple[tuple[str, str, tuple[str, str]], ...] = (
    (
        "ps_mem_pct",
        'check_ps_mem:  Process "python" (4242) of alice using 97.0% RAM (limit 90%) (last of 1)',
        ("oom_host", "job"),
    ),
    (
        "ps_physmem",
        'check_ps_physmem:  Process "python3" (91234) of bob using 120GB RAM (limit 100GB); '
        "killed (last of 2)",
        ("oom_host", "job"),
    ),
    (
        "ps_mem_swap",
        'check_ps_mem:  Process "a.out" (777) of carol using 300GB memory (RAM+swap) '
        "(limit 256GB) (last of 1)",
        ("oom_host", "job"),
    ),
    (
        "ps_cpu",
        'check_ps_cpu:  Process "stress" (555) of dave using 400.0% CPU (limit 200%) (last of 1)',
        ("user_code", "job"),
    ),
    (
        "ps_time",
        'check_ps_time:  Process "matlab" (556) of erin has consumed 12:00:00 of CPU time '
        "(limit 60m0s) (last of 1)",
        ("user_code", "job"),
    ),
    (
        "ps_unauth",
        'check_ps_unauth_users:  alice\'s "python" process is unauthorized. (PID 4242)',
        ("user_code", "job"),
    ),
    (
        "ps_rogue",
        'check_ps_userproc_lineage:  bob\'s "sleep" process is rogue. (PID 999)',
        ("user_code", "job"),
    ),
)


def _params(messages: tuple[tuple[str, str, tuple[str, str]], ...]) -> list[object]:
    out = []
    for n, (key, msg, want) in enumerate(messages):
        for k, (wkey, wrap, names) in enumerate(WRAPS):
            host = HOSTS[(n + k) % len(HOSTS)]
            node = host if names else None
            out.append(pytest.param(wrap(host, msg), want, node, id=f"{key}-{wkey}"))
    return out


@pytest.mark.parametrize(("text", "want", "node"), _params(MESSAGES))
def test_an_nhc_check_failure_reads_as_its_check_means_on_the_host_it_names(
    text: str, want: tuple[str, str], node: str | None
) -> None:
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == (*want, node), (text, got.explanation)


@pytest.mark.parametrize(("text", "want", "node"), _params(USER_MESSAGES))
def test_a_users_process_that_nhc_flags_is_the_users_never_the_nodes(
    text: str, want: tuple[str, str], node: str | None
) -> None:
    got = explain_text(text)
    assert (got.category, got.blame) == want, (text, got.explanation)
    assert got.blame != "node"


# NHC's own lines that state no failure: a check logged as non-fatal, the success banner, the
# online helper clearing NHC's note (helpers/node-mark-online "$0:  Marking $HOSTNAME online and
# clearing note ($OLD_NOTE_LEADER $OLD_NOTE)", "Not onlining ...", "Skipping ..."), a drained
# node's note echoed back in the "already online" branch
HEALTHY = (
    "check_fs_mount:  /scratch not mounted (non-fatal)\n",
    "Node Health Check completed successfully (1s).\n",
    "Nov 29 09:12:01 gpu-a-07 nhc[20345]: Node Health Check starting.\n",
    "/usr/libexec/nhc/node-mark-online:  Marking gpu-a-07 online and clearing note "
    "(NHC: check_fs_mount:  /scratch not mounted)\n",
    "/usr/libexec/nhc/node-mark-online:  Marking node0123 online and clearing note "
    "(NHC: check_nvsmi_healthmon:  nvidia-smi:  The GPU has fallen off the bus or has "
    "otherwise become inaccessible)\n",
    "/usr/libexec/nhc/node-mark-online:  Not onlining gpu-a-07:  Down for non-NHC reason "
    "(maint reboot)\n",
    "/usr/libexec/nhc/node-mark-online:  Skipping down node gpu-a-07 "
    "(NHC: check_hw_physmem:  Actual RAM size (2 kB) less than minimum allowed (4 kB).)\n",
    "/usr/libexec/nhc/node-mark-online:  Node gpu-a-07 is already online.\n",
    "/usr/libexec/nhc/node-mark-offline:  Not offlining gpu-a-07:  Already offline with no "
    "note set.\n",
)


@pytest.mark.parametrize("text", HEALTHY)
def test_nhc_lines_that_state_no_failure_never_blame_the_node(text: str) -> None:
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == (None, "unknown", None), (
        text,
        got.explanation,
    )


@pytest.mark.parametrize(
    "text", [w(HOSTS[0], m) for _, m, _ in USER_MESSAGES[:2] for _, w, _ in WRAPS[2:4]]
)
def test_a_user_process_note_beside_an_nhc_node_fault_leaves_the_node_fault_standing(
    text: str,
) -> None:
    # the node fault outranks the user's process over its limit when both are shown
    fault = (
        "Nov 29 09:12:02 gpu-a-07 nhc[20346]: Health check failed:  check_nvsmi_healthmon:  "
        "nvidia-smi:  The GPU has fallen off the bus or has otherwise become inaccessible\n"
    )
    got = explain_text(text + fault)
    assert (got.category, got.blame, got.node) == ("gpu_hardware", "node", "gpu-a-07")
