"""Splits a kernel log line into its time/host/sequence prefix and the kernel's message.

Formats: /dev/kmsg records (`6,1234,5678,-;msg`), dmesg (`[ 1234.567890] msg`), dmesg -T
(`[Mon Nov 22 12:00:00 2026] msg`), dmesg -x --time-format iso (`kern  :err   : 2025-...+00:00
msg`), journalctl short / syslog (`Nov 22 12:00:00 host kernel: msg`, optionally with an inner
`[ 12.3]`), journalctl -o short-iso and RFC 3339 syslog (`2026-11-22T12:00:00+0000 host kernel:`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

from collector.parse.common import MAX_LINE

_KMSG = re.compile(r"^(?P<prio>\d+),(?P<seq>\d+),(?P<usec>\d+),(?P<flags>[^;,]*)(?:,[^;]*)?;")
# talosctl dmesg: "192.168.11.119: kern: warning: [2026-04-22T21:27:51.291660856Z]: NVRM: ..."
_TALOS = re.compile(
    r"^(?:(?P<host>[\w.:-]+): )?(?P<fac>[a-z]+): +(?P<lvl>[a-z]+): \[(?P<iso>\d{4}-[^\]]+)\]: "
)
_DECODE = re.compile(r"^(?P<fac>[a-z]+)\s*:(?P<lvl>[a-z]+)\s*: ")
_MONO = re.compile(r"^\[\s*(?P<rel>\+)?(?P<up>\d+\.\d+)\](?:\[\s*[TC]\d+\])?\s?")
_CTIME = re.compile(r"^\[(?P<ct>[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4})\]\s?")
_ISO = re.compile(
    r"^(?P<iso>\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?)\s+"
)
_SYSLOG = re.compile(
    r"^(?P<mon>[A-Z][a-z]{2}) +(?P<day>\d{1,2}) (?P<hms>\d\d:\d\d:\d\d)(?:\.\d+)? "
)
_ANY_BRACKET = re.compile(
    r"^\[[^\]\[]{1,40}\]\s"
)  # a stamp we cannot read (e.g. localized dmesg -T)
_HOST_KERNEL = re.compile(r"^(?:(?P<host>\S+) )?kernel(?:\[\d+\])?: ")
_LEVELS = {
    "emerg": 0,
    "alert": 1,
    "crit": 2,
    "err": 3,
    "warn": 4,
    "warning": 4,
    "error": 3,
    "notice": 5,
    "info": 6,
    "debug": 7,
}
_MONTH_NAMES = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_MONTHS = {m: i for i, m in enumerate(_MONTH_NAMES, 1)}


@dataclass(frozen=True)
class KernelLine:
    """One kernel log line with its prefix parsed off."""

    message: str
    ts: float | None = None  # epoch seconds, when the line (or boot_ts) gives it
    uptime_s: float | None = None  # seconds since boot, when the line gives it
    host: str | None = None
    seq: int | None = None  # /dev/kmsg sequence number
    level: int | None = None  # syslog level 0..7
    continuation: bool = False  # an indented follow-on line of the previous record


def _iso_ts(text: str) -> float | None:
    text = re.sub(r"(\.\d{6})\d+", r"\1", text.replace(",", ".").replace(" ", "T", 1))
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    elif re.search(r"[+-]\d{4}$", text):
        text = f"{text[:-2]}:{text[-2:]}"
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


def _syslog_ts(m: re.Match[str], year: int | None) -> float | None:
    # Classic syslog stamps carry no year or zone: take the given year (default: this one), UTC.
    y = year if year is not None else datetime.now(UTC).year
    try:
        h, mi, s = (int(x) for x in m["hms"].split(":"))
        dt = datetime(y, _MONTHS[m["mon"]], int(m["day"]), h, mi, s, tzinfo=UTC)
    except (KeyError, ValueError):
        return None
    return dt.timestamp()


def split_kernel_line(
    line: str, *, boot_ts: float | None = None, year: int | None = None
) -> KernelLine:
    """Parse the prefix of one kernel log line; the message is what the kernel printed."""
    line = line[:MAX_LINE].rstrip("\r\n")
    if line[:1] in (" ", "\t") and line.strip():
        return KernelLine(message=line.strip(), continuation=True)
    ts: float | None = None
    uptime: float | None = None
    host: str | None = None
    seq: int | None = None
    level: int | None = None
    rest = line
    if m := _KMSG.match(rest):
        level = int(m["prio"]) & 7
        seq = int(m["seq"])
        uptime = int(m["usec"]) / 1e6
        rest = rest[m.end() :]
    elif m := _TALOS.match(rest):
        level, host = _LEVELS.get(m["lvl"]), m["host"]
        ts = _iso_ts(m["iso"])
        rest = rest[m.end() :]
    else:
        if m := _DECODE.match(rest):
            level = _LEVELS.get(m["lvl"])
            rest = rest[m.end() :]
        if m := _ISO.match(rest):
            ts = _iso_ts(m["iso"])
            rest = rest[m.end() :]
        elif m := _SYSLOG.match(rest):
            ts = _syslog_ts(m, year)
            rest = rest[m.end() :]
        elif m := _CTIME.match(rest):
            try:
                ts = (
                    datetime.strptime(m["ct"], "%a %b %d %H:%M:%S %Y")
                    .replace(tzinfo=UTC)
                    .timestamp()
                )
            except ValueError:
                ts = None
            rest = rest[m.end() :]
        elif (m := _ANY_BRACKET.match(rest)) and not _MONO.match(rest):
            rest = rest[m.end() :]
        if m := _HOST_KERNEL.match(rest):
            host = m["host"]
            rest = rest[m.end() :]
        if m := _MONO.match(rest):
            # `dmesg -H` prints "[  +0.000844]": a delta to the previous line, not an uptime.
            uptime = None if m["rel"] else float(m["up"])
            rest = rest[m.end() :]
            if host is None and (m := _HOST_KERNEL.match(rest)):  # journalctl -o short-monotonic
                host = m["host"]
                rest = rest[m.end() :]
    if ts is None and uptime is not None and boot_ts is not None:
        ts = boot_ts + uptime
    return KernelLine(message=rest.strip(), ts=ts, uptime_s=uptime, host=host, seq=seq, level=level)
