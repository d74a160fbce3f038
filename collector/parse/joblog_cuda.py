"""Recognizers for CUDA errors and CUDA out-of-memory as PyTorch, CuPy and CUDA print them."""

from __future__ import annotations

import re
from typing import Any

from collector.parse.joblog_rules import JobMatch
from timeline.models import EventKind, Severity

# cudaError_t values for the texts CUDA prints (cuda_runtime_api.h); `key` is a stable slug.
_CUDA_TEXTS: list[tuple[str, str, int]] = [
    ("an illegal memory access was encountered", "illegal_memory_access", 700),
    ("device-side assert triggered", "device_side_assert", 710),
    ("uncorrectable ECC error encountered", "uncorrectable_ecc", 214),
    ("unspecified launch failure", "launch_failure", 719),
    ("misaligned address", "misaligned_address", 716),
    ("an illegal instruction was encountered", "illegal_instruction", 715),
    ("the launch timed out and was terminated", "launch_timeout", 702),
    ("uncorrectable NVLink error", "nvlink_uncorrectable", 220),
    ("too many resources requested for launch", "launch_out_of_resources", 701),
    ("unknown error", "unknown", 999),
    ("no CUDA-capable device is detected", "no_device", 100),
    ("all CUDA-capable devices are busy or unavailable", "devices_unavailable", 46),
    ("operation not permitted when stream is capturing", "stream_capture_unsupported", 900),
]
# An exception's name, a file name or a size is read from the start of its run only (the
# lookbehinds): the leftmost match starts there anyway, and retrying from every position of a
# long run of word characters or digits is quadratic on hostile lines.
_CUDA_ERR = re.compile(
    r"(?:(?<![\w.])(?P<exc>[\w.]+Error): )?"
    # Without an exception before it, a name is read from the first cudaError/CUDA_ERROR_ of its
    # word ((?(exc)|...)): a later one in the same word ends where it ends, and retrying each was
    # quadratic on a word repeating them. The text is the rest of the line less its trailing
    # blanks (its first character when that is all), as the lazy [^\n]+?\s*$ read it, without
    # retrying \s*$ from every blank of a long run.
    r"(?:CUDA error|CUDA driver error|(?(exc)|(?<!\w)(?>\w*?(?=cudaError|CUDA_ERROR_)))"
    r"(?P<name>(?:cudaError|CUDA_ERROR_)\w++)): (?P<text>[^\n](?:[^\n]*[^\s])?)\s*$"
)
# Old PyTorch: "RuntimeError: cuda runtime error (39) : uncorrectable ECC error encountered at f:l"
_OLD_RUNTIME = re.compile(
    r"(?:(?<![\w.])(?P<exc>[\w.]+Error): )?cuda runtime error \((?P<num>\d+)\) : (?P<text>.+?)"
    r"(?: at (?P<at>\S+))?$"
)
_ASSERT = re.compile(
    r"(?<!\S)(?P<file>\S+\.cuh?):(?P<line>\d+): (?P<fn>.*?): block: \[(?P<block>[\d,]+)\], "
    r"thread: \[(?P<thread>[\d,]+)\] Assertion `(?P<expr>.*)` failed\."
)
_CUBLAS = re.compile(
    r"\b(?P<status>CUBLAS_STATUS_\w+|CUDNN_STATUS_\w+)\b(?: when calling `(?P<call>[^`(]+))?"
)

_OOM = re.compile(r"(?:(?<![\w.])(?P<exc>[\w.]+Error): )?CUDA out of memory\.(?P<rest>.*)$")
_SIZE = r"(?<![\d.])[\d.]+ [KMGTP]?i?B"
_OOM_FIELDS = [
    ("tried", re.compile(r"Tried to allocate (" + _SIZE + ")")),
    ("gpu", re.compile(r"\bGPU (\d+)")),
    ("total", re.compile(r"total capacity of (" + _SIZE + ")|(" + _SIZE + ") total capacity")),
    ("free", re.compile(r"of which (" + _SIZE + ") is free|(" + _SIZE + ") free")),
    ("process_in_use", re.compile(r"this process has (" + _SIZE + ") memory in use")),
    (
        "allocated_by_torch",
        re.compile(r"(" + _SIZE + ") is allocated by PyTorch|(" + _SIZE + ") already allocated"),
    ),
    (
        "reserved_by_torch",
        re.compile(r"(" + _SIZE + ") is reserved by PyTorch|(" + _SIZE + ") reserved in total"),
    ),
]
# Old PyTorch's THC (<= 1.4) printed cudaGetErrorString after the number: the warning
# "THCudaCheck FAIL file=f line=l error=2 : out of memory" and the exception "cuda runtime error
# (2) : out of memory at f:l" (aten/src/THC/THCGeneral.cpp __THCudaCheck).
_OTHER_OOM = re.compile(
    r"(?:CUDA error: out of memory|cudaErrorMemoryAllocation: out of memory|"
    r"CUDA_ERROR_OUT_OF_MEMORY: out of memory|RESOURCE_EXHAUSTED: Out of memory|"
    r"cuda runtime error \(\d+\) : out of memory|THCudaCheck FAIL file=\S+ line=\d+ error=\d+ : "
    r"out of memory)"
)
_UNITS = {
    "B": 1,
    "KB": 1e3,
    "MB": 1e6,
    "GB": 1e9,
    "TB": 1e12,
    "KIB": 2**10,
    "MIB": 2**20,
    "GIB": 2**30,
    "TIB": 2**40,
    "PIB": 2**50,
    "PB": 1e15,
}


def size_bytes(text: str) -> int | None:
    """'200.00 GiB' -> bytes."""
    try:
        num, unit = text.split()
        return int(float(num) * _UNITS[unit.upper()])
    except (ValueError, KeyError):
        return None


def cuda_oom(line: str) -> JobMatch | None:
    """PyTorch's `CUDA out of memory. Tried to allocate ...` and plain CUDA OOM errors."""
    m = _OOM.search(line)
    if m is None:
        if o := _OTHER_OOM.search(line):
            return JobMatch(
                EventKind.CUDA_OOM, o.group(0), 2, Severity.ERROR, {"text": line.strip()}
            )
        return None
    p: dict[str, Any] = {}
    if m["exc"]:
        p["exception"] = m["exc"]
    for key, pat in _OOM_FIELDS:
        if f := pat.search(m["rest"]):
            value = next(g for g in f.groups() if g)
            if key == "gpu":
                p["gpu_index"] = int(value)
            else:
                p[key] = value
                p[key + "_bytes"] = size_bytes(value)
    msg = "CUDA out of memory" + (f": tried to allocate {p['tried']}" if "tried" in p else "")
    if "gpu_index" in p:
        msg += f" on GPU {p['gpu_index']}"
    return JobMatch(EventKind.CUDA_OOM, msg, 2, Severity.ERROR, p)


def cuda_error(line: str) -> JobMatch | None:
    """CUDA runtime/driver errors, device-side assertion lines, cuBLAS/cuDNN failures."""
    if m := _ASSERT.search(line):
        p: dict[str, Any] = {
            "error": "device_side_assert",
            "file": m["file"],
            "line": int(m["line"]),
            "function": m["fn"],
            "assertion": m["expr"],
            "block": m["block"],
            "thread": m["thread"],
        }
        # The message leaves out block/thread so one assert from many threads collapses as a flood.
        msg = f"device-side assertion failed at {m['file']}:{m['line']}: {m['expr']}"
        return JobMatch(EventKind.CUDA_ERROR, msg, 710, Severity.ERROR, p)
    if (m := _CUDA_ERR.search(line) or _OLD_RUNTIME.search(line)) and "out of memory" not in m[
        "text"
    ]:
        text = m["text"].strip()
        p = {"text": text}
        if m["exc"]:
            p["exception"] = m["exc"]
        groups = m.groupdict()
        if groups.get("name"):
            p["cuda_error_name"] = groups["name"]
        if groups.get("at"):
            p["where"] = groups["at"]
        code = None
        for phrase, key, num in _CUDA_TEXTS:
            if text.startswith(phrase):
                p["error"], code = key, num
                break
        return JobMatch(EventKind.CUDA_ERROR, f"CUDA error: {text}", code, Severity.ERROR, p)
    if m := _CUBLAS.search(line):
        p = {"error": m["status"].lower(), "text": line.strip()}
        if m["call"]:
            p["call"] = m["call"]
        return JobMatch(EventKind.CUDA_ERROR, f"{m['status']}", None, Severity.ERROR, p)
    return None
