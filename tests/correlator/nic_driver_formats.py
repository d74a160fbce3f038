"""The NIC drivers of a GPU node as their printk formats write them (probe set twenty-two).

Formats (torvalds/linux; the commit is the stored version the format was read at):
- drivers/net/ethernet/mellanox/mlx5/core/events.c @02039fb659 port_module: mlx5_core_info
  "Port module event: module %u, %s" (mlx5_pme_status: "Cable plugged", "Cable unplugged") and
  "Port module event[error]: module %u, %s, %s" ("Cable error" and mlx5_pme_error's nine texts);
- mlx5/core/health.c (master): poll_health "device's health compromised - reached miss count",
  "Fatal error %u detected"; print_health_info "PCI slot is unavailable", "Health issue
  observed, %s, severity(%d) %s:" (hsynd_str, mlx5_loglevel_str), "synd 0x%x: %s";
  mlx5_fw_fatal_reporter_err_work "Driver is in error state. Unloading";
  mlx5_health_try_recover "health recovery failed" / "health recovery succeeded";
- mlx5/core/cmd.c: wait_func "%s(0x%x) timeout. Will cause a leak of a command resource",
  cb_timeout_handler "cmd[%d]: %s(0x%x) Async, timeout. Will cause a leak of a command resource"
  / "cmd[%d]: %s(0x%x) Async, recovered after timeout"; main.c "mlx5_pci_err_detected was
  called" (later "%s Device state = %d health sensors: %d pci_status: %d. Enter, ..."); older
  mlx5_core_{err,warn,info} put "%s:%d:(pid %d): " (function, line, pid) in front;
- drivers/infiniband/hw/efa/efa_com.c @010e85f9e4 "The device didn't send any completion for
  admin cmd %s(%d) status %d (...)", "The device sent a completion but the driver didn't receive
  any MSI-X interrupt for admin cmd %s(%d) status %d (...)", "Wait for completion (polling)
  timeout", efa_com_cmd_exec "Failed to process command %s (opcode %u) comp_status %d err %d"
  (later without comp_status), behind ib_core's __ibdev_printk "%s %s %s: " (driver, PCI
  device, ib device);
- drivers/infiniband/hw/bnxt_re/qplib_rcfw.c @00ed905ab8 "QPLIB: cmdq[%#x]=%#x timedout
  (%d)msec" (later without "QPLIB: ") and "cmdq[%#x]=%#x status %#x", on bnxt_en's PCI device.

Verdicts follow tests/fixtures/corpus/README.md's policy: a NIC's own faults (port module
errors, firmware health, command timeouts) are interconnect/infra pinned to the host that logged
them, like IB port events; a cable plugged, a recovery that succeeded, a firmware warning and a
command the device refused (which a caller can cause) never blame the node. The deliveries and
the helpers that fill the formats are shared with host_driver_formats.py.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest

from tests.correlator.emitter_probe import HOSTS, spread
from tests.correlator.kernel_deliveries import CLOCK
from tests.correlator.kernel_deliveries import DELIVERIES as KERNEL_DELIVERIES

NET_INFRA = ("interconnect", "infra")
QUIET = (None, "unknown")

MLX5_BDF = ("0000:41:00.0", "0000:c1:00.1", "0000:0c:00.0", "0000:9a:00.0")
# newer mlx5_core_info/err/warn print the message alone; older ones "%s:%d:(pid %d): " first
MLX5 = ("mlx5_core {bdf}: ", "mlx5_core {bdf}: {func}:{line}:(pid {pid}): ")
_MLX5_VALUES = {"bdf": MLX5_BDF, "line": (254, 852, 1094), "pid": (0, 920, 72061)}
PME_ERRORS = (
    "Power budget exceeded",
    "Long Range for non MLNX cable",
    "Bus stuck(I2C or data shorted)",
    "No EEPROM/retry timeout",
    "Enforce part number list",
    "Unknown identifier",
    "High Temperature",
    "Bad or shorted cable/module",
    "Unknown status",
)
# hsynd_str's texts of a firmware or hardware fault (not "High temperature": a warning)
FATAL_SYNDROMES = (
    (0x1, "firmware internal error"),
    (0x7, "irisc not responding"),
    (0x8, "unrecoverable hardware error"),
    (0x9, "firmware CRC error"),
    (0xA, "ICM fetch PCI error"),
    (0xB, "HW fatal error"),
)
MLX5_CMDS = (
    ("ENABLE_HCA", 0x104),
    ("TEARDOWN_HCA", 0x103),
    ("ACCESS_REG", 0x805),
    ("MANAGE_PAGES", 0x108),
    ("2ERR_QP", 0x507),
    ("CREATE_MKEY", 0x200),
)
EFA = ("efa {bdf} efa_{n}: ",)
EFA_BDF = ("0000:10:1c.0", "0000:31:00.0", "0000:a0:1d.0")
EFA_CMDS = (("CREATE_QP", 1), ("REG_MR", 6), ("CREATE_CQ", 8), ("CREATE_AH", 3))

# (key, line prefixes, format, its values, the verdict)
# (key, line prefixes, format, its values, the verdict)
Format = tuple[str, tuple[str, ...], str, Mapping[str, Sequence[Any]], tuple[str | None, str]]

# kernel_formats' deliveries, and dmesg typed at a root prompt (the prompt's host is the host
# whose kernel log it is)
DELIVERIES = (*KERNEL_DELIVERIES, ("[root@{host} ~]# dmesg -T | tail -5\n[{ctime}] ", True))


def block(lines: Sequence[str], i: int, delivery: str) -> str:
    """`lines` behind one delivery; a prompt delivery types dmesg once, before them all."""
    clock = {k: v[i % len(v)] for k, v in CLOCK.items()}
    host = HOSTS[i % len(HOSTS)]
    head, sep, each = delivery.rpartition("\n")
    first = (head + sep).format(host=host, **clock)
    return first + "".join(each.format(host=host, **clock) + line + "\n" for line in lines)


def probes(formats: Sequence[Format]) -> Iterator[Any]:
    """One pytest param per format, value set and delivery: (text, verdict, host named)."""
    for key, prefixes, fmt, values, want in formats:
        for i, subs in enumerate(spread({**values, "prefix": prefixes})):
            line = subs["prefix"].format(**subs) + fmt.format(**subs)
            for d, (delivery, named) in enumerate(DELIVERIES):
                node = HOSTS[(i + d) % len(HOSTS)] if named else None
                yield pytest.param(block([line], i + d, delivery), want, node, id=f"{key}-{i}-d{d}")


def _mlx5(key: str, fmt: str, func: str, want: tuple[str | None, str], **v: Any) -> Format:
    return (key, MLX5, fmt, {**_MLX5_VALUES, "func": (func,), **v}, want)


NIC_FAULTS: list[Format] = [
    _mlx5(
        "mlx5-pme-error",
        "Port module event[error]: module {mod}, Cable error, {err}",
        "port_module",
        NET_INFRA,
        mod=(0, 1, 3),
        err=PME_ERRORS,
    ),
    _mlx5(
        "mlx5-pme-unplugged",
        "Port module event: module {mod}, Cable unplugged",
        "port_module",
        NET_INFRA,
        mod=(0, 1),
    ),
    _mlx5(
        "mlx5-miss-count",
        "device's health compromised - reached miss count",
        "poll_health",
        NET_INFRA,
    ),
    _mlx5("mlx5-fatal", "Fatal error {n} detected", "poll_health", NET_INFRA, n=(1, 2, 3, 4, 5)),
    _mlx5(
        "mlx5-health-issue",
        "Health issue observed, {synd}, severity({sev}) {lvl}:",
        "print_health_info",
        NET_INFRA,
        synd=tuple(s for _, s in FATAL_SYNDROMES),
        sev=(3, 2, 0, 1),
        lvl=("ERROR", "CRITICAL", "EMERGENCY", "ALERT"),
    ),
    _mlx5(
        "mlx5-synd",
        "synd 0x{code:x}: {synd}",
        "print_health_info",
        NET_INFRA,
        code=tuple(c for c, _ in FATAL_SYNDROMES),
        synd=tuple(s for _, s in FATAL_SYNDROMES),
    ),
    _mlx5("mlx5-pci-slot", "PCI slot is unavailable", "print_health_info", NET_INFRA),
    _mlx5(
        "mlx5-unloading",
        "Driver is in error state. Unloading",
        "mlx5_fw_fatal_reporter_err_work",
        NET_INFRA,
    ),
    _mlx5(
        "mlx5-recovery-failed",
        "{what}",
        "mlx5_health_try_recover",
        NET_INFRA,
        what=(
            "health recovery failed",
            "health recovery flow aborted, PCI reads still not working",
        ),
    ),
    _mlx5(
        "mlx5-cmd-timeout",
        "{cmd}(0x{op:x}) timeout. Will cause a leak of a command resource",
        "wait_func",
        NET_INFRA,
        cmd=tuple(c for c, _ in MLX5_CMDS),
        op=tuple(o for _, o in MLX5_CMDS),
    ),
    _mlx5(
        "mlx5-cmd-async-timeout",
        "cmd[{i}]: {cmd}(0x{op:x}) Async, timeout. Will cause a leak of a command resource",
        "cb_timeout_handler",
        NET_INFRA,
        i=(0, 7, 31),
        cmd=tuple(c for c, _ in MLX5_CMDS),
        op=tuple(o for _, o in MLX5_CMDS),
    ),
    (
        "mlx5-pci-err",
        ("mlx5_core {bdf}: ",),
        "{what}",
        {
            "bdf": MLX5_BDF,
            "what": (
                "mlx5_pci_err_detected was called",
                "mlx5_pci_err_detected Device state = 1 health sensors: 1 pci_status: 1. "
                "Enter, pci channel state = 2",
            ),
        },
        NET_INFRA,
    ),
    (
        "efa-no-completion",
        EFA,
        "The device didn't send any completion for admin cmd {cmd}({op}) status 1 (ctx "
        "0x{ctx}, sq producer: {p}, sq consumer: {c}, cq consumer: {c})",
        {
            "bdf": EFA_BDF,
            "n": (0, 1, 3),
            "cmd": tuple(c for c, _ in EFA_CMDS),
            "op": tuple(o for _, o in EFA_CMDS),
            "ctx": ("00000000a1b2c3d4", "ffff9a1b2c3d4000"),
            "p": (1045, 7),
            "c": (1044, 6),
        },
        NET_INFRA,
    ),
    (
        "efa-no-msix",
        EFA,
        "The device sent a completion but the driver didn't receive any MSI-X interrupt for "
        "admin cmd {cmd}({op}) status 2 (ctx: 0x{ctx}, sq producer: 12, sq consumer: 11, cq "
        "consumer: 11)",
        {
            "bdf": EFA_BDF,
            "n": (0, 2),
            "cmd": tuple(c for c, _ in EFA_CMDS),
            "op": tuple(o for _, o in EFA_CMDS),
            "ctx": ("00000000a1b2c3d4",),
        },
        NET_INFRA,
    ),
    (
        "efa-polling-timeout",
        EFA,
        "Wait for completion (polling) timeout",
        {"bdf": EFA_BDF, "n": (0, 1)},
        NET_INFRA,
    ),
    (
        "efa-cmd-timed-out",
        EFA,
        "Failed to process command {cmd} (opcode {op}){cs} err -62",
        {
            "bdf": EFA_BDF,
            "n": (0, 1),
            "cmd": tuple(c for c, _ in EFA_CMDS),
            "op": tuple(o for _, o in EFA_CMDS),
            "cs": (" comp_status 0", ""),
        },
        NET_INFRA,
    ),
    (
        "bnxt-re-cmdq-timeout",
        ("bnxt_en {bdf}: ",),
        "{q}cmdq[{cookie}]={op} timedout ({ms})msec",
        {
            "bdf": ("0000:41:00.0", "0000:c4:00.1"),
            "q": ("QPLIB: ", ""),
            "cookie": ("0x4b9", "0x1a", "0x7f3"),
            "op": ("0x15", "0x1", "0x88"),
            "ms": (20000, 10000),
        },
        NET_INFRA,
    ),
]

# Informational lines and commands the device refused: never the node
NIC_QUIET: list[Format] = [
    _mlx5(
        "mlx5-pme-plugged",
        "Port module event: module {mod}, Cable plugged",
        "port_module",
        QUIET,
        mod=(0, 1, 3),
    ),
    _mlx5(
        "mlx5-health-warning",
        "Health issue observed, High temperature, severity({sev}) {lvl}:",
        "print_health_info",
        QUIET,
        sev=(4, 5, 6),
        lvl=("WARNING", "NOTICE", "INFO"),
    ),
    _mlx5(
        "mlx5-recovered",
        "{what}",
        "mlx5_health_try_recover",
        QUIET,
        what=(
            "health recovery succeeded",
            "cmd[3]: ACCESS_REG(0x805) Async, recovered after timeout",
        ),
    ),
    (
        "efa-cmd-rejected",
        EFA,
        "Failed to process command {cmd} (opcode {op}){cs} err {err}",
        {
            "bdf": EFA_BDF,
            "n": (0, 1),
            "cmd": tuple(c for c, _ in EFA_CMDS),
            "op": tuple(o for _, o in EFA_CMDS),
            "cs": (" comp_status 2", " comp_status 3", ""),
            "err": (-22, -12, -95),
        },
        QUIET,
    ),
    (
        "bnxt-re-cmdq-status",
        ("bnxt_en {bdf}: ",),
        "{q}cmdq[{cookie}]={op} status {st}",
        {
            "bdf": ("0000:41:00.0",),
            "q": ("QPLIB: ", ""),
            "cookie": ("0x4b9", "0x1a"),
            "op": ("0x15", "0x1"),
            "st": ("0x1", "0x4"),
        },
        QUIET,
    ),
]
