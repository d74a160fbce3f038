"""The Linux kernel's own failure lines as its printk formats write them (probe set six).

Formats (torvalds/linux unless named; the commit is the stored version the format was read at):
- mm/oom_kill.c @c797bc88f7: __oom_kill_process "%s: Killed process %d (%s) total-vm:%lukB,
  anon-rss:%lukB, file-rss:%lukB, shmem-rss:%lukB, UID:%u pgtables:%lukB oom_score_adj:%hd" with
  "Out of memory" or "Memory cgroup out of memory", older kernels' "%s: Kill process %d (%s) score
  %u or sacrifice child"; dump_header "%s invoked oom-killer: gfp_mask=%#x(%pGg), order=%d,
  oom_score_adj=%hd"; dump_oom_summary "oom-kill:constraint=%s,nodemask=%*pbl,cpuset=...";
  __oom_reap_task_mm "oom_reaper: reaped process %d (%s), now anon-rss:%lukB, ...";
- kernel/hung_task.c "INFO: task %s:%d blocked for more than %ld seconds."; kernel/watchdog.c
  @95def8fe33 "BUG: soft lockup - CPU#%d stuck for %us! [%s:%d]" (pr_fmt "watchdog: "), the hard
  lockup "Watchdog detected hard LOCKUP on cpu %d" ("NMI watchdog: " in watchdog_hld.c, "CPU%u: "
  in newer watchdog.c); kernel/panic.c "Kernel panic - not syncing: %s";
- arch/x86/kernel/dumpstack.c @4ff4382c0d __die_header "%s: %04lx [#%d]%s%s%s%s%s" (6.9 and later
  behind "Oops: "), after arch/x86/mm/fault.c's "BUG: kernel NULL pointer dereference, address: %px"
  / "BUG: unable to handle page fault for address: %px";
- arch/x86/kernel/cpu/mce/core.c __print_mce pr_emerg(HW_ERR "CPU %d: Machine Check%s: %Lx Bank %d:
  %016Lx") under pr_fmt "mce: " (HW_ERR is "[Hardware Error]: "; before the pr_fmt, 2.6.3x-4.x,
  the bare "[Hardware Error]: CPU %d: Machine Check Exception: ..."), mce_notify_irq "Machine check
  events logged"; drivers/edac/edac_mc.c edac_ce_error / edac_ue_error "%d CE %s%son %s (%s
  page:0x%lx offset:0x%lx grain:%ld syndrome:0x%lx%s%s)" / "%d UE ..." behind "EDAC MC%d: ";
- drivers/pci/pcie/aer.c @d83d886e69 aer_isr_one_error "%s%s error message received from %s" and
  aer_print_error "PCIe Bus Error: severity=%s, type=%s, (%s)"; aer_error_severity_string is
  "Uncorrected (Non-Fatal)", "Uncorrected (Fatal)", "Corrected" (6.x: "Uncorrectable ...",
  "Correctable"); aer_probe "enabled with IRQ %d" (pr_fmt "AER: ");
- arch/x86/mm/fault.c show_signal_msg "%s[%d]: segfault at %lx ip %px sp %px error %lx in %s";
  arch/x86/kernel/traps.c @00229a5430 show_signal "%s[%d] %s%s ip:%lx sp:%lx error:%lx" ("trap
  invalid opcode", "trap divide_error", "general protection fault"), pr_fmt "traps: ";
- net/sunrpc/clnt.c call_timeout "%s: server %s not responding, still trying" / "timed out" and
  call_decode "%s: server %s OK"; lustre/lustre-release lustre/ptlrpc/import.c @5748379d28
  LCONSOLE_ERROR_MSG(0x167, "%s: This client was evicted by %.*s; in progress operations using
  this service will fail."), client.c "%s: operation %s to node %s failed: rc = %d" (11-0);
  fs/ext4/super.c "EXT4-fs error (device %s): %s:%d: comm %s: %pV", "Remounting filesystem
  read-only"; fs/xfs/xfs_log.c @5693384805 xlog_force_shutdown "Filesystem has been shut down due
  to log error (0x%x).", fs/xfs/xfs_fsops.c @010e85f9e4 "Log I/O Error Detected. Shutting down
  filesystem"; block/blk-core.c print_req_error "%s error, dev %s, sector %llu op 0x%x:(%s) flags
  0x%x phys_seg %u prio class %u" (blk_status_to_str; 4.x-5.x behind "blk_update_request: ");
- drivers/acpi/apei/ghes.c @0237d7f355 __ghes_print_estatus ("{%u}" HW_ERR) and
  drivers/firmware/efi/cper.c @0a5a46a6a6 cper_estatus_print "event severity: %s" (recoverable and
  fatal are uncorrected, corrected a report); mce/core.c kill_me_maybe "Uncorrected hardware memory
  error in user-access at %llx"; mm/memory-failure.c action_result "%#lx: recovery action for %s:
  %s" (pr_fmt "Memory failure: "; 2.6.32 to 4.x "MCE %#lx: %s page recovery: %s"), @003fa195911d
  kill_proc "Memory failure: %#lx: Sending SIGBUS to %s:%d due to hardware memory corruption"
  (v4.x "Killing", 2.6.32 to 4.x kill_proc_ao "MCE %#lx: Killing %s:%d early due to ..."),
  kill_procs "%#lx: forcibly killing %s:%d because of failure to unmap corrupted page"; ghes.c
  memory_failure_cb "%#llx: Sending SIGBUS to %s:%d due to ..."; arch/x86/mm/fault.c do_sigbus
  "MCE: Killing %s:%d due to hardware memory corruption fault at %lx";
- util-linux sys-utils/choom.c "pid %d's current OOM score adjust value: %d" (a healthy control).

Verdicts follow tests/fixtures/corpus/README.md's policy: kernel and cgroup OOM kills are
oom_host/job; soft lockups, hung tasks, panics, I/O and filesystem errors are node/node; an NFS or
Lustre server lost is node/infra (kernel_nfs_down, kernel_lustre_down); the kernel's report of a
user process killed by a signal is user_code/job (kernel_process_crash). The host is the syslog or
journal host field; plain dmesg and dmesg -T name none; a line that names the server it lost (the
NFS server, the Lustre NID, SERVER_NAMED) names that server, never the client that printed it
(probe set 32). "Machine check events logged" is printed
for corrected errors too, so alone it is node/unknown.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

OOM_HOST = ("oom_host", "job")
NODE = ("node", "node")
INFRA = ("node", "infra")
USER = ("user_code", "job")
GPU_NODE = ("gpu_hardware", "node")
NODE_UNSETTLED = ("node", "unknown")
NOTHING = (None, "unknown")
# formats whose line names the server the client lost: the placeholder holding it (its host is the
# culprit: an NFS server as mounted, a Lustre NID's address before "@<net>")
SERVER_NAMED = {"nfs-not-responding": "srv", "lustre-op-failed": "nid"}
COMM = ("python", "pt_main_thread", "torchrun", "python3.10", "pt_data_worker")
PIDS = (4242, 123456, 77)

# (key, format as the kernel prints it, its values, the verdict)
FORMATS: list[tuple[str, str, Mapping[str, Sequence[Any]], tuple[str | None, str]]] = [
    # --- mm/oom_kill.c -------------------------------------------------------------------------
    (
        "oom-killed",
        "{scope}: Killed process {pid} ({comm}) total-vm:{vm}kB, anon-rss:{rss}kB, file-rss:0kB, "
        "shmem-rss:{shm}kB, UID:{uid} pgtables:{pgt}kB oom_score_adj:{adj}",
        {
            "scope": ("Out of memory", "Memory cgroup out of memory"),
            "pid": PIDS,
            "comm": COMM,
            "vm": (123456789, 52428800),
            "rss": (98765432, 4096),
            "shm": (0, 2048),
            "uid": (1000, 0, 54321),
            "pgt": (200000, 96),
            "adj": (0, -997, 1000),
        },
        OOM_HOST,
    ),
    (
        "oom-kill-older",
        "{scope}: Kill process {pid} ({comm}) score {score} or sacrifice child",
        {
            "scope": ("Out of memory", "Memory cgroup out of memory"),
            "pid": PIDS,
            "comm": COMM,
            "score": (912, 1, 1000),
        },
        OOM_HOST,
    ),
    (
        "oom-invoked",
        "{comm} invoked oom-killer: gfp_mask={gfp}, order={order}, oom_score_adj={adj}",
        {
            "comm": COMM,
            "gfp": (
                "0x100cca(GFP_HIGHUSER_MOVABLE)",
                "0x6200ca(GFP_HIGHUSER_MOVABLE)",
                "0x24201ca",
            ),
            "order": (0, 3),
            "adj": (0, -997, 1000),
        },
        OOM_HOST,
    ),
    (
        "oom-summary",
        "oom-kill:constraint={constraint},nodemask=(null),cpuset={cpuset},mems_allowed=0-1,"
        "{scope},task_memcg={memcg},task={comm},pid={pid},uid={uid}",
        {
            "constraint": ("CONSTRAINT_NONE", "CONSTRAINT_MEMCG"),
            "cpuset": ("/", "slurm", "kubepods"),
            "scope": ("global_oom", "oom_memcg=/slurm/uid_1000/job_4711"),
            "memcg": ("/slurm/uid_1000/job_4711/step_0", "/user.slice/user-1000.slice"),
            "comm": COMM,
            "pid": PIDS,
            "uid": (1000, 0),
        },
        OOM_HOST,
    ),
    (
        "oom-reaped",
        "oom_reaper: reaped process {pid} ({comm}), now anon-rss:0kB, file-rss:0kB, shmem-rss:0kB",
        {"pid": PIDS, "comm": COMM},
        OOM_HOST,
    ),
    # --- hung task, watchdogs, panic, oops -----------------------------------------------------
    (
        "hung-task",
        "INFO: task {comm}:{pid} blocked for more than {secs} seconds.",
        {"comm": (*COMM, "kworker/u256:3", "nvidia-smi"), "pid": PIDS, "secs": (120, 122, 245)},
        NODE,
    ),
    (
        "soft-lockup",
        "{pre}BUG: soft lockup - CPU#{cpu} stuck for {secs}s! [{comm}:{pid}]",
        {
            "pre": ("watchdog: ", "NMI watchdog: ", ""),
            "cpu": (0, 12, 191),
            "secs": (22, 23, 83),
            "comm": (*COMM, "kworker/3:1"),
            "pid": PIDS,
        },
        NODE,
    ),
    (
        "hard-lockup",
        "{pre}Watchdog detected hard LOCKUP on cpu {cpu}",
        {"pre": ("NMI watchdog: ", "watchdog: CPU17: ", ""), "cpu": (5, 17, 0)},
        NODE,
    ),
    (
        "panic",
        "Kernel panic - not syncing: {why}",
        {
            "why": (
                "Fatal exception",
                "Hard LOCKUP",
                "softlockup: hung tasks",
                "hung_task: blocked tasks",
                "Fatal exception in interrupt",
            )
        },
        NODE,
    ),
    (
        "oops-header",
        "{oops}{what}: {err} [#{n}]{flags}",
        {
            "oops": ("", "Oops: "),
            "what": (
                "general protection fault, probably for non-canonical address 0xdead000000000100",
                "invalid opcode",
                "Oops",
                "general protection fault",
            ),
            "err": ("0000", "0002", "0010"),
            "n": (1, 2),
            "flags": (" SMP NOPTI", " PREEMPT SMP KASAN NOPTI", " SMP PTI", " PREEMPT_RT SMP"),
        },
        NODE,
    ),
    # --- MCE / EDAC ----------------------------------------------------------------------------
    ("mce-logged", "mce: [Hardware Error]: Machine check events logged", {}, NODE_UNSETTLED),
    (
        "mce-print",
        "{pre}[Hardware Error]: CPU {cpu}: Machine Check{exc}: {mcg} Bank {bank}: {status}",
        {
            "pre": ("mce: ", ""),
            "cpu": (3, 0, 95),
            "exc": (" Exception", ""),
            "mcg": (0, 5, 7),
            "bank": (5, 17, 1),
            "status": ("be00000000800400", "fe00000000800400"),
        },
        NODE,
    ),
    (
        "edac-ue",
        "EDAC MC{mc}: {n} UE {msg} on {label} (channel:{ch} slot:0 page:0x{page} offset:0x0 "
        "grain:32)",
        {
            "mc": (0, 1, 3),
            "n": (1, 2),
            "msg": ("memory read error", "memory scrubbing error"),
            "label": ("CPU_SrcID#1_MC#0_Chan#0_DIMM#0", "P1_DIMM_B1", "unknown memory"),
            "ch": (0, 1),
            "page": ("1234", "ffeed"),
        },
        NODE,
    ),
    # --- APEI/GHES (ghes.c "{%u}" HW_ERR, cper.c cper_estatus_print), mce/core.c kill_me_maybe,
    # mm/memory-failure.c action_result: an uncorrected error poisons a page (a corrected
    # record is a report: test_rules_emitter_formats_kernel.HEALTHY)
    (
        "ghes-uncorrected",
        "{{{rec}}}[Hardware Error]: event severity: {sev}",
        {"rec": (1, 42), "sev": ("fatal", "recoverable")},
        NODE,
    ),
    (
        "mce-user-access",
        "mce: Uncorrected hardware memory error in user-access at {pa}",
        {"pa": ("8a398a400", "af34214200")},
        NODE,
    ),
    (
        "memory-failure",
        "Memory failure: 0x{pfn}: recovery action for {page}: {result}",
        {
            "pfn": ("8a398a", "af34214"),
            "page": ("dirty LRU page", "reserved kernel page", "free buddy page"),
            "result": ("Recovered", "Failed", "Ignored", "Delayed"),
        },
        NODE,
    ),
    # 2.6.32 to 4.x action_result before pr_fmt "Memory failure: " (dirty in front at first)
    (
        "memory-failure-old",
        "MCE 0x{pfn}: {page} page recovery: {result}",
        {
            "pfn": ("b4365", "af34214"),
            "page": ("dirty LRU", "clean LRU", "free buddy", "huge"),
            "result": ("Recovered", "Failed", "Ignored", "Delayed"),
        },
        NODE,
    ),
    # mm/memory-failure.c kill_proc / kill_procs (every era), ghes.c memory_failure_cb: the
    # process killed for a poisoned page it had mapped is the host's memory fault
    (
        "memory-failure-kill",
        "Memory failure: 0x{pfn}: {verb} {comm}:{pid} due to hardware memory corruption",
        {
            "pfn": ("8a398a", "af34214"),
            "verb": ("Sending SIGBUS to", "Killing"),
            "comm": COMM,
            "pid": PIDS,
        },
        NODE,
    ),
    (
        "memory-failure-forcibly-killing",
        "{prefix}0x{pfn}: forcibly killing {comm}:{pid} because of failure to unmap corrupted page",
        {
            "prefix": ("Memory failure: ", "MCE "),
            "pfn": ("8a398a", "af34214"),
            "comm": COMM,
            "pid": PIDS,
        },
        NODE,
    ),
    (
        "memory-failure-kill-early",
        "MCE 0x{pfn}: Killing {comm}:{pid} early due to hardware memory corruption",
        {"pfn": ("b4365", "af34214"), "comm": COMM, "pid": PIDS},
        NODE,
    ),
    (
        "ghes-memory-failure-cb",
        "0x{pfn}: Sending SIGBUS to {comm}:{pid} due to hardware memory corruption",
        {"pfn": ("8a398a", "af34214"), "comm": COMM, "pid": PIDS},
        NODE,
    ),
    (
        "mce-killing-fault",
        "MCE: Killing {comm}:{pid} due to hardware memory corruption fault at {va}",
        {"comm": COMM, "pid": PIDS, "va": ("7fffcab7d000", "00007f3a2c001000")},
        NODE,
    ),
    # --- PCIe AER (the existing pcie_aer rule: uncorrected on a GPU's link, gpu_hardware/node) --
    (
        "aer-received",
        "pcieport {port}: AER: {multi}{sev} error message received from {dev}",
        {
            "port": ("0000:00:03.0", "0000:40:01.1", "0000:b0:02.0"),
            "multi": ("", "Multiple "),
            "sev": (
                "Uncorrected (Non-Fatal)",
                "Uncorrected (Fatal)",
                "Uncorrectable (Fatal)",
                "Uncorrectable (Non-Fatal)",
            ),
            "dev": ("0000:3b:00.0", "0000:c1:00.0", "0009:01:00.0"),
        },
        GPU_NODE,
    ),
    (
        "aer-bus-error",
        "{drv} {dev}: {aer}PCIe Bus Error: severity={sev}, type={type}, ({agent})",
        {
            "drv": ("nvidia", "pcieport"),
            "dev": ("0000:3b:00.0", "0000:00:03.0", "0000:c1:00.0"),
            "aer": ("", "AER: "),
            "sev": ("Uncorrected (Non-Fatal)", "Uncorrected (Fatal)", "Uncorrectable (Fatal)"),
            "type": ("Transaction Layer", "Data Link Layer", "Physical Layer"),
            "agent": ("Requester ID", "Receiver ID", "Completer ID"),
        },
        GPU_NODE,
    ),
    # --- user processes killed by the kernel (kernel_process_crash) ----------------------------
    (
        "segfault",
        "{comm}[{pid}]: segfault at {addr} ip {ip} sp {sp} error {err} in {lib}",
        {
            "comm": COMM,
            "pid": PIDS,
            "addr": ("0", "7f0a1b2c3d4e", "18"),
            "ip": ("00007f1234567890", "0000563412345678"),
            "sp": ("00007ffd12345678",),
            "err": (4, 6, 14),
            "lib": ("libc.so.6[7f1234500000+195000]", "libtorch_cuda.so[7f0a00000000+4000000]"),
        },
        USER,
    ),
    (
        "trap",
        "traps: {comm}[{pid}] {what} ip:{ip} sp:{sp} error:{err} in {lib}",
        {
            "comm": COMM,
            "pid": PIDS,
            "what": (
                "general protection fault",
                "trap invalid opcode",
                "trap divide_error",
                "trap divide error",
            ),
            "ip": ("7f0a1b2c3d4e", "55d1c0ffee00"),
            "sp": ("7ffc5d6e7f80",),
            "err": (0, 4),
            "lib": ("libtorch_cpu.so[7f0a00000000+4000000]", "python3.10[55d1c0000000+2a0000]"),
        },
        USER,
    ),
    # --- filesystems and block devices ---------------------------------------------------------
    (
        "nfs-not-responding",
        "nfs: server {srv} not responding, {how}",
        {
            "srv": ("nfs01", "10.0.0.5", "storage.cluster.example.org", "[fd00::5]"),
            "how": ("still trying", "timed out"),
        },
        INFRA,
    ),
    (
        "lustre-op-failed",
        "LustreError: 11-0: {fs}-OST{ost}-osc-{sb}: operation {op} to node {nid} failed: rc = {rc}",
        {
            "fs": ("scratch", "lustre"),
            "ost": ("0003", "001a"),
            "sb": ("ffff9a1b2c3d4000",),
            "op": ("ost_read", "ost_write", "obd_ping", "ldlm_enqueue"),
            "nid": ("10.0.0.3@o2ib", "172.16.4.9@tcp"),
            "rc": (-107, -110, -5),
        },
        INFRA,
    ),
    (
        "lustre-evicted",
        "LustreError: 167-0: {fs}-{tgt}-{kind}-{sb}: This client was evicted by {fs}-{tgt}; in "
        "progress operations using this service will fail.",
        {
            "fs": ("scratch", "lustre", "home"),
            "tgt": ("MDT0000", "OST0003"),
            "kind": ("mdc", "osc"),
            "sb": ("ffff9a1b2c3d4000", "ffff8f0e12345800"),
        },
        INFRA,
    ),
    (
        "ext4-error",
        "EXT4-fs error (device {dev}): {func}:{line}: {inode}comm {comm}: {what}",
        {
            "dev": ("sda1", "nvme0n1p2", "dm-0", "md127"),
            "func": ("ext4_find_entry", "ext4_lookup", "ext4_read_block_bitmap"),
            "line": (1455, 1785, 412),
            "inode": ("", "inode #2: ", "inode #1310721: "),
            "comm": COMM,
            "what": (
                "reading directory lblock 0",
                "Cannot read block bitmap",
                "deleted inode referenced: 1310722",
            ),
        },
        NODE,
    ),
    (
        "ext4-remount-ro",
        "EXT4-fs ({dev}): Remounting filesystem read-only",
        {"dev": ("sda1", "nvme0n1p2", "dm-0")},
        NODE,
    ),
    (
        "xfs-shutdown",
        "XFS ({dev}): {what}",
        {
            "dev": ("md0", "nvme0n1p1", "dm-3"),
            "what": (
                "Filesystem has been shut down due to log error (0x2).",
                "Log I/O Error Detected. Shutting down filesystem",
                "Corruption of in-memory data detected.  Shutting down filesystem",
                "log I/O error -5",
            ),
        },
        NODE,
    ),
    (
        "blk-error",
        "{caller}{status} error, dev {dev}, sector {sector} op 0x{op}:({opname}) flags 0x{flags} "
        "phys_seg {seg} prio class {prio}",
        {
            "caller": ("", "blk_update_request: ", "print_req_error: "),
            "status": ("I/O", "critical medium", "critical target", "timeout"),
            "dev": ("sda", "nvme0n1", "sdb", "vdb"),
            "sector": (123456, 0, 9876543210),
            "op": ("0", "1"),
            "opname": ("READ", "WRITE"),
            "flags": ("80700", "0", "9800"),
            "seg": (1, 32),
            "prio": (0, 2),
        },
        NODE,
    ),
]
