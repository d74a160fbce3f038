"""The corpus's training cases that explain still gets wrong, each with the reason: the known
misses and each round's strict-xfail set of cases written before the rules that cover them.
Held-out cases are never listed."""

from __future__ import annotations

# A bare SIGBUS: the signal reasoner (correlator/rules/signals.py) reads it as /dev/shm too small
# (oom_host) and leaves blame unknown, since a hardware memory error (BUS_MCEERR) also ends a
# process so; round nine's label blames the job (user_code, alternative oom_host).
_SIGBUS = "a bare SIGBUS: the reasoner keeps blame unknown, the label blames the job"
# Training cases explain still gets wrong, each with the reason; validation is never listed.
KNOWN_TRAINING_MISSES: dict[str, str] = {
    "146_nvidia-smi-handle-unknown-sxid-nvswitch.txt": (
        "a lost GPU and fatal NVSwitch SXids: the rules rank the lost GPU first, the label "
        "blames the NVSwitch fabric that took it down"
    ),
    "499_torchrun-child-failed-sigbus-exitcode-7-host-server.txt": _SIGBUS,
    "500_torch-elastic-legacy-logger-failed-exitcode-7.txt": _SIGBUS,
}
# Round twelve's new training cases that the rules of 9ea726b get wrong: they were written before
# any rule that covers them (strict: a case that starts passing must leave this set). 593 (the
# Determined task-log wrapper), 605 (kube-scheduler's FitError) and 606 (HiveD's wait reason)
# are covered by r12-rules (tests/correlator/test_rules_emitters_round12.py).
ROUND12_OPEN: set[str] = set()
# Round thirteen's new training cases that the rules of f0e5281 get wrong: they were written
# before any rule that covers them (strict: a case that starts passing must leave this set).
# 611 (Open MPI openib's 'from H' host), 612 (`rdma link` port down), 622 (scontrol's JobState=
# read as sacct's state) and 637 (a Cloud Logging record's node) are covered by r13-rules-b
# (tests/correlator/test_rules_emitters_round13.py).
ROUND13_OPEN: set[str] = set()
# Round fourteen's new training cases that the rules of 02b7fc8 got wrong, each with the reason
# (strict: a case that starts passing must leave this set). 640 and 641 (Ray's node marked dead
# in every wording), 648 (slurmstepd's "slurmstepd-<node>:" prefix) and 656 (PRRTE's lost remote
# daemon) are covered by r14-rules (tests/correlator/test_rules_emitters_round14.py).
ROUND14_OPEN: dict[str, str] = {}
# Round fifteen's new training cases that the rules of 511c70c got wrong (strict, as
# ROUND14_OPEN). 665 (a link-local IPv6 peer), 666 (a log pasted above an nvidia-smi -q
# document), 672 (ibstat's port states) and 677 (an admission with no allocatable at all, and
# an Event's source host) are covered by r15-rules
# (tests/correlator/test_rules_emitters_round15.py).
ROUND15_OPEN: dict[str, str] = {}
# Round sixteen's new training cases that the rules of 0e5a9c3 got wrong (strict, as
# ROUND15_OPEN). 681 (FastSocket's flow-placement fallback), 689 (sinfo rows run together on one
# line) and 696 (Fabric Manager failing to start, in a zh_CN journal) are covered by r16-rules
# (tests/correlator/test_rules_emitters_round16.py); 691 (Hydra's block naming its node beside
# proxy lines of another host) by probe set seven's Hydra block hosts, written from MPICH's
# formats before round sixteen's cases were gathered
# (tests/correlator/test_rules_emitter_formats_mpi_hydra_ucx.py).
ROUND16_OPEN: dict[str, str] = {}
# Round seventeen's new training cases that the rules of 72d0bf7 get wrong, each with the reason
# (strict, as ROUND16_OPEN was). 700 (the Hugging Face test harness's "stderr: " label) and 702
# (Ray's raylet dying unexpectedly) are covered by r17-rules
# (tests/correlator/test_rules_emitters_round17.py); 705's category and blame too, and its
# all-digit syslog host since the syslog host field alone takes an all-digit name.
ROUND17_OPEN: dict[str, str] = {}
# Round eighteen's new training cases that the rules of 2a66319 get wrong, each with the reason
# (strict, as ROUND17_OPEN was). 718 (Ray's dead worker at "Worker IP address: 0.0.0.0") is
# covered since a bind-all, loopback or multicast address names no node
# (tests/correlator/test_rules_emitters_round18.py); 727 (XLA's coordination service setting a
# task to ERROR on a heartbeat timeout) by probe set eight's JAX rules, written from XLA's
# sources without reading it, with their heartbeat verdicts set to the corpus policy's
# (tests/correlator/test_rules_emitter_formats_jax.py).
ROUND18_OPEN: dict[str, str] = {}
# Round nineteen's new training cases that the rules of cec95b2 get wrong, each with the reason
# (strict, as ROUND18_OPEN was). 736 (Ray's dead-worker message hard-wrapped by a terminal, its
# guessed causes cut off onto lines of their own) is covered since Ray's guesses read as
# guesses on any line (tests/correlator/test_rules_emitters_round19.py).
ROUND19_OPEN: dict[str, str] = {}
# Round twenty's new training cases that the rules of 465fb60 get wrong, each with the reason
# (strict, as ROUND19_OPEN was): none, all six score right at first sight.
ROUND20_OPEN: dict[str, str] = {}
# Round twenty-one's new training cases that the rules of 083f2d7 get wrong, each with the reason
# (strict, as ROUND20_OPEN was).
ROUND21_OPEN: dict[str, str] = {
    "762_torch-elastic-sigbus-exitcode-7-container-host-slapo.txt": (
        "torch elastic's failures block with `exitcode  : -7` / `Signal 7 (SIGBUS)` and no "
        "DataLoader shared-memory message reads as oom_host/unknown, a kill signal with no "
        "cause; the corpus reads it as user_code/job (alternative oom_host/job), so the blame "
        "matches neither reading (the culprit host is right)"
    ),
}
# Round twenty-two's new training cases that the rules of 789a97c get wrong, each with the reason
# (strict, as ROUND21_OPEN was). 769 (pynvml's NVMLError_Unknown) is covered since pynvml's
# exception classes read as nvmlReturn_t documents them
# (tests/correlator/test_rules_emitters_round22.py).
ROUND22_OPEN: dict[str, str] = {}
# Round twenty-three's new training cases that the rules of 3550c85 get wrong, each with the
# reason (strict, as ROUND22_OPEN was): none, all five score right at first sight.
ROUND23_OPEN: dict[str, str] = {}
# Round twenty-four's new training cases that the rules of c28b357 got wrong (789, a device
# plugin's own Go panic inside its Allocate; 790, a kubelet admission failure with the plugin's
# socket unreachable) are covered by the device plugin's Go-traceback rule and the kubelet's
# plugin-socket dial rule, read from the emitters' formats
# (tests/correlator/test_rules_emitters_round24.py).
ROUND24_OPEN: dict[str, str] = {}
# Round twenty-five's new training cases that the rules of b0e2bca got wrong (802, the GPU
# operator's driver daemonset crash-looping in a describe-pod block; 804, Dask's comm connect
# timeout naming its peer) are covered by the describe-pod reader for the operator's own daemons
# and the Dask comm rule, read from the emitters' formats
# (tests/correlator/test_rules_emitters_round25.py).
ROUND25_OPEN: dict[str, str] = {}
# Round twenty-six's new training cases that the rules of 8f70ae2 get wrong, each with the reason
# (strict, as ROUND25_OPEN was): none, all five score right at first sight.
ROUND26_OPEN: dict[str, str] = {}
# Round twenty-seven's new training cases that the rules of 5e02cda got wrong (818, slurmd's
# fatal gres.conf line in a node's journal; 823, nvidia-smi's gpu_recovery_action rows beside
# dcgmi dmon's XIDER column) are covered by slurm.json's slurmd_gres_conf_fatal and the per-GPU
# field readers, read from the emitters' formats (tests/correlator/test_rules_emitters_round27.py).
ROUND27_OPEN: dict[str, str] = {}
# Round twenty-eight's new training cases that the rules of 7f1532b got wrong (826, slurmctld
# setting two nodes DOWN, where explain named the one named more often; 828, the kubelet's
# 'Failed to admit pod ... node has conditions: [DiskPressure]') are covered by the node-of rule
# for independent node faults (correlator/explain/reasoning.py) and the kubelet's admit-refusal
# lines in kubelet.json, read from the emitters' formats
# (tests/correlator/test_rules_emitters_round28.py).
ROUND28_OPEN: dict[str, str] = {}
# Round twenty-nine's new training cases that the rules of b710e09 get wrong, each with the
# reason (strict, as ROUND28_OPEN was). 838, TORQUE's 'unable to run job, send to MOM ... failed'
# and 'MOM rejected/timeout', is covered by slurm.json's torque_server_mom_unreachable, read from
# the emitter's source (tests/correlator/test_rules_emitters_round29.py). 836, a host's EDAC
# corrected-error lines on one DIMM, is covered by readers_edac.py's count against mcelog's
# per-DIMM trigger (10 corrected errors in 24 h), read from mcelog's and the kernel's sources
# (tests/correlator/test_explain_edac_ce.py). 837, NHC's generic 'Check check_xid_errors
# returned 1' beside the check's own 'Found XID errors: 63', is covered by nhc.json's
# nhc_check_returned (a check failure that names no cause) and the fault beside it deciding the
# category (correlator/rules/checks.py, reasoning.causes_beside_checks), read from NHC's source
# (tests/correlator/test_explain_check_names_fault.py).
ROUND29_OPEN: dict[str, str] = {}
# Round thirty's new training cases that the rules of 2f7f3d3 get wrong, each with the reason
# (strict, as ROUND29_OPEN was). 847 (the raylet's fatal 'This node has beem marked as dead.')
# and 849 (sinfo -R rows whose 20-character REASON is 'gres/gpu count repor') are covered by
# ray.json's ray_raylet_marked_dead_self and slurm.json's sinfo_reason_row_truncated, read from
# the emitters' sources (tests/correlator/test_rules_emitters_round30.py). 854 (MPICH's MPD:
# three ranks 'killed by signal 11', one 'killed by signal 9') is read by mpi.json's MPD rules
# (pmodels/mpich src/pm/mpd/mpiexec.py), and its lone SIGKILL as MPD's teardown after the
# crash (mpdman.py kills every other rank's process group with SIGKILL), in explain and the
# live correlator alike (signals.after_crash; test_rules_emitter_formats_teardown_kills.py).
ROUND30_OPEN: dict[str, str] = {}
# Round thirty-one's new training cases that the rules of 08027c4 get wrong, each with the
# reason (strict, as ROUND30_OPEN was). All four are covered by rules read from the emitters'
# sources (tests/correlator/test_rules_emitters_round31.py): 858 (Dask's nanny 'Worker exceeded
# 95% memory budget. Restarting') by dask.json's dask_nanny_memory_budget_restart, 859 (RMM's
# 'std::bad_alloc: out_of_memory: RMM failure at: ... Maximum pool size exceeded') by rmm.json's
# rmm_device_out_of_memory with the host OOM rule no longer reading RMM's device exceptions, 862
# (Hydra's 'execvp error on file 0 (No such file or directory)') by mpi.json's
# hydra_execvp_error and 863 (slurmd's 'fatal: MIG mode is enabled, but no MIG devices were
# found') by slurm.json's slurmd_nvml_mig_without_instances.
ROUND31_OPEN: dict[str, str] = {}
# Round thirty-two's new training cases that the rules of e520538 get wrong, each with the
# reason (strict, as ROUND31_OPEN was). Both are covered by rules read from the emitters' sources
# (tests/correlator/test_rules_emitters_round32.py): 868 (ProcessGroupNCCL's heartbeat monitor
# 'Failed to get exception dump flag from the global store.Connection reset by peer') by
# pytorch.json's pg_dump_flag_store_error and 869 (Horovod's gloo launcher 'Process N exit with
# status code 250.') by horovod.json's horovod_gloo_process_exit.
ROUND32_OPEN: dict[str, str] = {}
# Round thirty-three's new training cases that the rules of 01bc83c get wrong, each with the
# reason (strict, as ROUND32_OPEN was): none, all five score right at first sight.
ROUND33_OPEN: dict[str, str] = {}
# Round thirty-four's new training cases that the rules of 11b9ae7 get wrong, each with the
# reason (strict, as ROUND33_OPEN was). 886 (Ray's ActorDiedError 'The actor never ran - it was
# cancelled before it started running.' under a SYSTEM_ERROR worker death, read as a job cancel)
# is covered by ray.json's ray_actor_never_started, read from the emitter's source
# (tests/correlator/test_rules_emitters_round34.py).
ROUND34_OPEN: dict[str, str] = {}
# Round thirty-five's new training cases that the rules of fdba9fd get wrong, each with the
# reason (strict, as ROUND34_OPEN was): none, all five score right at first sight.
ROUND35_OPEN: dict[str, str] = {}
# Round thirty-six's new training cases that the rules of d6437b2 get wrong, each with the
# reason (strict, as ROUND35_OPEN was). 909 (Ray's ActorDiedError whose "ip:" line holds the
# address as a markdown autolink) is read through collector/parse/transcribe.py's fold of a link
# whose text is its own target, and 914 (UCCL's "[WARN host pid tid func file:line]" prefix)
# through its logger's prefix (correlator/explain/hosts_fields.py, from uccl include/util/debug.h;
# tests/correlator/test_rules_emitters_round36.py).
ROUND36_OPEN: dict[str, str] = {}
# Round thirty-seven's new training cases that the rules of bf5e1f9 get wrong, each with the
# reason (strict, as ROUND36_OPEN was). 920 (TensorFlow's HIP out-of-memory lines under the
# shell prompt "user@nid002070:/path> ", whose host went unread) is covered by SUSE's bash
# prompt, read from its source (openSUSE/aaa_base files/etc/bash.bashrc: "user@host:dir> ",
# root's "host:dir # "; correlator/explain/hosts_fields.py SUSE_PROMPT and SUSE_ROOT_PROMPT,
# tests/correlator/test_explain_host_conventions_matrix.py).
ROUND37_OPEN: dict[str, str] = {}
# Round thirty-eight's new training cases that the rules of 2dfb24e get wrong, each with the
# reason (strict, as ROUND37_OPEN was). 929 (pyxis's enroot hook failure "[ERROR] Command not
# found: nvidia-container-cli", 98-nvidia.sh exiting with return code 1) is covered by
# pyxis.json's enroot_nvidia_hook_no_container_cli, read from its source (NVIDIA/enroot
# conf/hooks/98-nvidia.sh and src/common.sh: the node lacks the NVIDIA container toolkit;
# tests/correlator/test_rules_emitters_enroot_hooks.py).
ROUND38_OPEN: dict[str, str] = {}
# Round thirty-nine's new training cases that the rules of 43e269d get wrong, each with the
# reason (strict, as ROUND38_OPEN was): none, all five score right at first sight.
ROUND39_OPEN: dict[str, str] = {}
# Round forty's new training cases that the rules of 177c3d1 get wrong at first sight, each with
# the reason (strict, as ROUND39_OPEN was). 947 (a pod status in YAML, reason
# UnexpectedAdmissionError, "Pod Allocate failed due to pod <uid> container <name> unable to find
# GPU device allocation by scheduler, which is unexpected") is covered by kubelet.json's
# admission_device_allocation_failed, read from its sources (kubernetes/kubernetes
# pkg/kubelet/cm/admission/errors.go's "Allocate failed due to %v, which is unexpected" and
# kubelet.go rejectPod's "Pod " + message, around the node's device allocation failing:
# cm/devicemanager/manager.go's own errors, a GPU-sharing allocator not finding the scheduler's
# per-container decision as Project-HAMi/HAMi's device plugin server.go looks it up;
# tests/correlator/test_rules_emitter_formats_kubelet.py).
ROUND40_OPEN: dict[str, str] = {}
# Round forty-one's new training cases that the rules of f858b7d get wrong at first sight, each
# with the reason (strict, as ROUND40_OPEN was): none, all five score right at first sight.
ROUND41_OPEN: dict[str, str] = {}
# Round forty-two's new training cases that the rules of 6d65ff0 get wrong at first sight, each
# with the reason (strict, as ROUND41_OPEN was).
ROUND42_OPEN: dict[str, str] = {}
# Round forty-three's new training cases that the rules of ace8fa2 get wrong at first sight, each
# with the reason (strict, as ROUND42_OPEN was). 980 is 762's conflict again: the signal reasoner
# keeps a bare SIGBUS's blame unknown on purpose (_SIGBUS above), so no rule can meet the label
# without undoing that reading.
ROUND43_OPEN: dict[str, str] = {
    "980_torch-elastic-sigbus-exitcode-7-container-host.txt": (
        "torch elastic's failures block with `exitcode  : -7` / `Signal 7 (SIGBUS)` and no "
        "DataLoader shared-memory message reads as oom_host/unknown, a kill signal with no "
        "cause; the corpus reads it as user_code/job (as 499 and 762), so category and blame "
        "miss (the culprit host is right)"
    ),
}
# Round forty-four's new training cases that the rules of 48533c6 get wrong at first sight, each
# with the reason (strict, as ROUND43_OPEN was). Its one miss, 988 (nv-hostengine's `Failed to
# start host engine server`), is read by dcgm_hostengine_start since the commit after the cases.
ROUND44_OPEN: dict[str, str] = {}
# Round forty-five's new training cases that the rules of 381f4a6 get wrong at first sight, each
# with the reason (strict, as ROUND44_OPEN was). Its one miss, 1000 (slurmstepd's `Prolog hung on
# node worker-X`), is read by slurm_prolog_hung since the commit after the cases.
ROUND45_OPEN: dict[str, str] = {}
# Round forty-six's new training cases that the rules of 10a55c1 get wrong at first sight, each
# with the reason (strict, as ROUND45_OPEN was).
# Its miss 1006 (srun's `Requested node configuration is not available`, read as scheduler/infra)
# is read by slurm_request_unsatisfiable since the commit after the cases.
# Its miss 1007 (UCX's three-field "[host:pid :N] Caught signal 11" prefix named no host) is
# read since the commit after that.
ROUND46_OPEN: dict[str, str] = {}
# every round's open training misses with their reasons: the metamorphic tests leave them out
OPEN_ROUNDS = {
    **{f: "round twelve: written before the rules that cover it" for f in ROUND12_OPEN},
    **{f: "round thirteen: written before the rules that cover it" for f in ROUND13_OPEN},
    **{f: f"round fourteen: {why}" for f, why in ROUND14_OPEN.items()},
    **{f: f"round fifteen: {why}" for f, why in ROUND15_OPEN.items()},
    **{f: f"round sixteen: {why}" for f, why in ROUND16_OPEN.items()},
    **{f: f"round seventeen: {why}" for f, why in ROUND17_OPEN.items()},
    **{f: f"round eighteen: {why}" for f, why in ROUND18_OPEN.items()},
    **{f: f"round nineteen: {why}" for f, why in ROUND19_OPEN.items()},
    **{f: f"round twenty: {why}" for f, why in ROUND20_OPEN.items()},
    **{f: f"round twenty-one: {why}" for f, why in ROUND21_OPEN.items()},
    **{f: f"round twenty-two: {why}" for f, why in ROUND22_OPEN.items()},
    **{f: f"round twenty-three: {why}" for f, why in ROUND23_OPEN.items()},
    **{f: f"round twenty-four: {why}" for f, why in ROUND24_OPEN.items()},
    **{f: f"round twenty-five: {why}" for f, why in ROUND25_OPEN.items()},
    **{f: f"round twenty-six: {why}" for f, why in ROUND26_OPEN.items()},
    **{f: f"round twenty-seven: {why}" for f, why in ROUND27_OPEN.items()},
    **{f: f"round twenty-eight: {why}" for f, why in ROUND28_OPEN.items()},
    **{f: f"round twenty-nine: {why}" for f, why in ROUND29_OPEN.items()},
    **{f: f"round thirty: {why}" for f, why in ROUND30_OPEN.items()},
    **{f: f"round thirty-one: {why}" for f, why in ROUND31_OPEN.items()},
    **{f: f"round thirty-two: {why}" for f, why in ROUND32_OPEN.items()},
    **{f: f"round thirty-three: {why}" for f, why in ROUND33_OPEN.items()},
    **{f: f"round thirty-four: {why}" for f, why in ROUND34_OPEN.items()},
    **{f: f"round thirty-five: {why}" for f, why in ROUND35_OPEN.items()},
    **{f: f"round thirty-six: {why}" for f, why in ROUND36_OPEN.items()},
    **{f: f"round thirty-seven: {why}" for f, why in ROUND37_OPEN.items()},
    **{f: f"round thirty-eight: {why}" for f, why in ROUND38_OPEN.items()},
    **{f: f"round thirty-nine: {why}" for f, why in ROUND39_OPEN.items()},
    **{f: f"round forty: {why}" for f, why in ROUND40_OPEN.items()},
    **{f: f"round forty-one: {why}" for f, why in ROUND41_OPEN.items()},
    **{f: f"round forty-two: {why}" for f, why in ROUND42_OPEN.items()},
    **{f: f"round forty-three: {why}" for f, why in ROUND43_OPEN.items()},
    **{f: f"round forty-four: {why}" for f, why in ROUND44_OPEN.items()},
    **{f: f"round forty-five: {why}" for f, why in ROUND45_OPEN.items()},
    **{f: f"round forty-six: {why}" for f, why in ROUND46_OPEN.items()},
}
