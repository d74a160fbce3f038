"""The kernel's reports on a GPU node's other hardware as their printk formats write them: PCIe
AER on the failing device, EDAC/GHES memory errors, NVMe/SCSI media errors, CPU thermal
throttling (probe set twenty-two).

Formats (torvalds/linux; the commit is the stored version the format was read at):
- drivers/pci/pcie/aer.c @02a06f5f1a (pr_fmt and dev_fmt "AER: "): aer_print_error "PCIe Bus
  Error: severity=%s, type=%s, (%s)" and "  device [%04x:%04x] error status/mask=%08x/%08x"
  on the failing device (its driver's name in front), aer_print_port_info "%s%s error received:
  %04x:%02x:%02x.%d" on the root port (5.x "... error received: id=%04x");
  aer_error_severity_string "Uncorrectable (Non-Fatal)", "Uncorrectable (Fatal)", "Correctable"
  (before 4.20 "Uncorrected (...)", "Corrected");
- arch/x86/kernel/cpu/mce/therm_throt.c "CPU%d: %s temperature above threshold, cpu clock
  throttled (total events = %lu)" (5.x "... temperature is above threshold, cpu clock is
  throttled ..."), "CPU%d: %s temperature/speed normal"; drivers/edac/edac_mc.c "%d CE ..." /
  "%d UE ..." behind "EDAC MC%d: "; drivers/acpi/apei/ghes.c via cper_print_hdr "[Hardware
  Error]: event severity: %s";
- drivers/nvme/host/core.c nvme_log_error "%s: %s(0x%x) @ LBA %llu, %u blocks, %s (sct 0x%x /
  sc 0x%x) %s%s" (constants.c nvme_statuses); drivers/scsi/constants.c scsi_print_sense_hdr
  "Sense Key : %s [%s]" behind sd's "sd %s: [%s] tag#%d ".

Verdicts follow tests/fixtures/corpus/README.md's policy: uncorrected AER on an NVIDIA GPU is
gpu_hardware/node, on a NIC interconnect/infra (pinned to the host that logged it), on another
device (NVMe, SATA, USB, RAID) node/node; uncorrected memory errors and disk media errors are
node/node; corrected errors and informational lines never blame the node.
"""

from __future__ import annotations

from tests.correlator.nic_driver_formats import NET_INFRA, QUIET, Format

GPU_NODE = ("gpu_hardware", "node")
NODE = ("node", "node")

# aer.c's uncorrected severities, as 4.20+ (aer_error_severity_string) and older kernels word them
UNCORRECTED = (
    "Uncorrectable (Fatal)",
    "Uncorrectable (Non-Fatal)",
    "Uncorrected (Fatal)",
    "Uncorrected (Non-Fatal)",
)

HOST_FAULTS: list[Format] = [
    # --- PCIe AER on the failing device: its driver's name says what it is ---------------------
    (
        "aer-gpu",
        ("nvidia {bdf}: {aer}",),
        "PCIe Bus Error: severity={sev}, type={type}, ({agent})",
        {
            "bdf": ("0000:3b:00.0", "0000:c1:00.0", "0009:01:00.0"),
            "aer": ("AER: ", ""),
            "sev": UNCORRECTED,
            "type": ("Transaction Layer", "Data Link Layer", "Physical Layer"),
            "agent": ("Receiver ID", "Requester ID", "Completer ID"),
        },
        GPU_NODE,
    ),
    (
        "aer-nic",
        ("{drv} {bdf}: {aer}",),
        "PCIe Bus Error: severity={sev}, type={type}, ({agent})",
        {
            "drv": ("mlx5_core", "efa", "bnxt_en", "mlx5_core", "ice"),
            "bdf": ("0000:41:00.0", "0000:a0:1d.0", "0000:c4:00.1"),
            "aer": ("AER: ", ""),
            "sev": UNCORRECTED,
            "type": ("Transaction Layer", "Data Link Layer", "Physical Layer"),
            "agent": ("Receiver ID", "Requester ID", "Completer ID"),
        },
        NET_INFRA,
    ),
    (
        "aer-other",
        ("{drv} {bdf}: {aer}",),
        "PCIe Bus Error: severity={sev}, type={type}, ({agent})",
        {
            "drv": ("nvme", "ahci", "xhci_hcd", "megaraid_sas", "mpt3sas"),
            "bdf": ("0000:5e:00.0", "0000:00:17.0", "0000:01:00.0"),
            "aer": ("AER: ", ""),
            "sev": UNCORRECTED,
            "type": ("Transaction Layer", "Data Link Layer"),
            "agent": ("Receiver ID", "Requester ID"),
        },
        NODE,
    ),
    # --- machine checks, memory, disks -----------------------------------------------------------
    (
        "edac-ue-ghes",
        ("",),
        "EDAC MC{mc}: {n} UE {msg} on {label} (node:{node} card:{card} module:0 rank:0 "
        "page:0x{page} offset:0x{off} grain:{grain} syndrome:0x0)",
        {
            "mc": (0, 1),
            "n": (1, 3),
            "msg": ("Multi-bit ECC", "Uncorrectable ECC", "memory read error"),
            "label": ("unknown memory", "CPU_SrcID#0_Ha#0_Chan#1_DIMM#0", "P0_DIMM_A1"),
            "node": (0, 1),
            "card": (3, 0),
            "page": ("8a3c1", "12"),
            "off": ("0", "f80"),
            "grain": (64, 32),
        },
        NODE,
    ),
    (
        "ghes-fatal",
        ("{{{n}}}",),
        "[Hardware Error]: event severity: fatal",
        {"n": (1, 2)},
        NODE,
    ),
    (
        "nvme-media-error",
        ("",),
        "{disk}: {op}(0x{code}) @ LBA {lba}, {blocks} blocks, {status} (sct 0x{sct} / sc "
        "0x{sc}) {flags}",
        {
            "disk": ("nvme0n1", "nvme3n1", "nvme1n2"),
            "op": ("Read", "Write", "Read"),
            "code": ("2", "1", "2"),
            "lba": (123456789, 0, 4096),
            "blocks": (8, 256, 1),
            "status": (
                "Unrecovered Read Error",
                "Write Fault",
                "End-to-end Guard Check Error",
                "Data Transfer Error",
                "Internal Error",
            ),
            "sct": ("2", "2", "2", "0", "0"),
            "sc": ("81", "80", "82", "4", "6"),
            "flags": ("DNR", "MORE DNR", ""),
        },
        NODE,
    ),
    (
        "scsi-medium-error",
        ("sd {hctl}: [{disk}] tag#{tag} ",),
        "Sense Key : {key} [{kind}]",
        {
            "hctl": ("0:0:0:0", "2:0:1:0", "6:0:0:0"),
            "disk": ("sda", "sdb", "sdc"),
            "tag": (0, 17, 233),
            "key": ("Medium Error", "Hardware Error"),
            "kind": ("current", "deferred", "current"),
        },
        NODE,
    ),
]

# Corrected or informational lines: never the node
HOST_QUIET: list[Format] = [
    (
        "aer-device-line",
        ("{drv} {bdf}: {aer}",),
        "  device [{vid}:{did}] error status/mask={st}/{mask}",
        {
            "drv": ("nvidia", "mlx5_core", "nvme"),
            "bdf": ("0000:3b:00.0", "0000:41:00.0", "0000:5e:00.0"),
            "aer": ("AER: ", ""),
            "vid": ("10de", "15b3", "144d"),
            "did": ("2330", "1021", "a80a"),
            "st": ("00004000", "00000001", "00100000"),
            "mask": ("00000000", "00002000"),
        },
        # the collector reads it as a PCIe AER detail line: a weak sign, never the node's blame
        ("gpu_hardware", "unknown"),
    ),
    (
        "thermal-normal",
        ("{mce}",),
        "CPU{cpu}: {level} temperature/speed normal{total}",
        {
            "mce": ("", "mce: "),
            "cpu": (0, 17, 95),
            "level": ("Core", "Package"),
            "total": ("", " (total events = 12)"),
        },
        QUIET,
    ),
    (
        "edac-ce",
        ("",),
        "EDAC MC{mc}: {n} CE {msg} on {label} (channel:{ch} slot:0 page:0x{page} offset:0x0 "
        "grain:32 syndrome:0x0)",
        {
            "mc": (0, 1, 3),
            # under mcelog's per-DIMM trigger of 10: one report of more blames the node
            # (correlator/explain/readers_edac.py, tests/correlator/test_explain_edac_ce.py)
            "n": (1, 2, 9),
            "msg": ("memory read error", "Single-bit ECC", "memory scrubbing error"),
            "label": ("CPU_SrcID#0_MC#0_Chan#1_DIMM#0", "unknown memory", "P1_DIMM_B1"),
            "ch": (0, 1),
            "page": ("1234", "8a3c1"),
        },
        QUIET,
    ),
    (
        "ghes-corrected",
        ("{{{n}}}",),
        "[Hardware Error]: event severity: {sev}",
        {"n": (1, 2), "sev": ("corrected", "info")},
        QUIET,
    ),
]

# Thermal throttling of the host's CPUs (therm_throt.c): the CPU slowed down and said so; the
# kernel prints "temperature/speed normal" when it passes. Nothing failed, so it never blames
# the node; alone it is a weak sign on the node (node/unknown: look at its cooling).
THROTTLED = (
    "CPU{cpu}: {level} temperature above threshold, cpu clock throttled (total events = {n})",
    "CPU{cpu}: {level} temperature is above threshold, cpu clock is throttled (total events = {n})",
    "CPU{cpu}: {level} temperature is above threshold, cpu clock is throttled from last 8000 "
    "milli seconds (total events = {n})",
)
