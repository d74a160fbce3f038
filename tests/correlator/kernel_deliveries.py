"""How the kernel's lines reach a person: dmesg, dmesg -T, journalctl -k and classic syslog
prefixes, and the clock values a probe cycles through (shared by the kernel and NIC driver
probes)."""

from __future__ import annotations

# (delivery template, whether it names the host): dmesg's "[%5lu.%06lu] ", dmesg -T's ctime,
# journalctl -k's short format, classic syslog (rsyslog) with the kernel's own clock kept
DELIVERIES = (
    ("[{up}] ", False),
    ("[{ctime}] ", False),
    ("{mon} {dd} {hms} {host} kernel: ", True),
    ("{mon} {d2} {hms} {host} kernel: [{up}] ", True),
)
CLOCK = {  # one value set a probe, cycled by its index
    "up": ("   12.345678", " 1234.567890", "98765.000123", "1234567.890123"),
    "ctime": ("Mon Nov  7 10:11:12 2022", "Tue Mar 12 08:14:02 2024", "Sat Jan  4 23:59:59 2025"),
    "mon": ("Nov", "Mar", "Jan"),
    "dd": ("07", "12", "04"),
    "d2": (" 7", "12", " 4"),
    "hms": ("10:11:12", "08:14:02", "23:59:59"),
}
