"""The boundary contract in one declarative place: the type and bounds of every value taken in.

Every ingest item and query parameter is built from these types, so the database never sees a
value it would refuse (NUL in PostgreSQL text, 2^31 in an INTEGER column, NaN) and nothing
senseless is stored (year 3000, negative counts, 1e308 W). When a column changes type (say a
counter becomes a 4-byte int), change the type of its model field here and nothing else:
`tests/timeline/test_bounds.py` checks every model field against the range of its column.

Strings: no NUL or other C0 control character (text may hold tab, newline and carriage
return), capped; log text over its cap is cut with a marker instead of refused. JSON fields
(payloads, labels, taints) are capped in bytes and depth and hold only finite numbers within
64 bits and clean strings. Times are UNIX seconds between 1970 and 2100; the ingest endpoint
also asks for a window around now (`TimeWindow`, passed as validation context).
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, StringConstraints, ValidationInfo

# --- what each SQL column type can hold -------------------------------------------------------
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1  # Integer
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1  # BigInteger
FLOAT32_MAX = 3.4028234663852886e38  # REAL (4-byte float)
FLOAT64_MAX = 1.7976931348623157e308  # Float / double precision

# --- times -----------------------------------------------------------------------------------
TS_MIN = 0.0  # 1970-01-01: nothing we observe happened before
TS_MAX = 4102444800.0  # 2100-01-01: anything later is a broken clock or a forged value
WINDOW_CONTEXT = "time_window"  # validation-context key of the ingest's TimeWindow

# --- strings ---------------------------------------------------------------------------------
# Rust-regex patterns (pydantic-core checks them without calling back into Python).
NAME_PATTERN = r"^[^\x00-\x1F\x7F]*$"  # names and ids: no control character at all
TEXT_PATTERN = r"^[^\x00-\x08\x0B\x0C\x0E-\x1F\x7F]*$"  # text: tab, newline and CR allowed
_TEXT_BAD = re.compile(r"[\x00-\x08\x0B\x0C\x0E-\x1F\x7F]")
_NAME_BAD = re.compile(r"[\x00-\x1F\x7F]")
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")  # terminal colour/cursor codes
TRUNCATED = " ...[truncated]"  # marks log text cut at its cap
MESSAGE_MAX = 4096  # an event's message
RAW_MAX = 16384  # an event's raw text: the verbatim log line(s)

# --- JSON fields -----------------------------------------------------------------------------
PAYLOAD_MAX_BYTES = 16 * 1024  # an event's payload
JOB_PAYLOAD_MAX_BYTES = 32 * 1024  # a job's payload (scheduler extras)
LABELS_MAX_BYTES = 16 * 1024  # a node's labels, and its taints
JSON_MAX_DEPTH = 8
EXTRA_MAX_KEYS = 64  # DCGM profiling fields on one sample
JOB_MAX_NODES = 4096


def name(max_length: int, min_length: int = 0) -> StringConstraints:
    """Constraints of a name or id: no control character, `min_length`..`max_length` chars."""
    return StringConstraints(min_length=min_length, max_length=max_length, pattern=NAME_PATTERN)


def text(max_length: int) -> StringConstraints:
    """Constraints of free text (may span lines): no control but tab, newline, CR; capped."""
    return StringConstraints(max_length=max_length, pattern=TEXT_PATTERN)


def cap(value: str, limit: int) -> str:
    """Cut `value` to at most `limit` characters, marking the cut."""
    if len(value) <= limit:
        return value
    return value[: limit - len(TRUNCATED)] + TRUNCATED


def truncated(max_length: int) -> BeforeValidator:
    """Log text over `max_length` is cut with a marker, never refused for its length."""

    def cut(value: Any) -> Any:
        return cap(value, max_length) if isinstance(value, str) else value

    return BeforeValidator(cut)


def clean_text(value: str, limit: int | None = None) -> str:
    """`value` without NUL and other control characters (tab, newline, CR kept), capped.

    For parsers of text a cluster user can write (job output, kernel lines): they must hand
    the store only what the contract accepts. Terminal escape sequences (colours) go whole.
    """
    if _TEXT_BAD.search(value):
        value = _TEXT_BAD.sub("", _ANSI.sub("", value))
    return value if limit is None else cap(value, limit)


def clean_name(value: str | None, limit: int) -> str | None:
    """A name a user chose (job name, user annotation) with every control character removed,
    cut at `limit`: kept, where refusing it would let a job hide from the fleet view."""
    if value is None:
        return None
    return _NAME_BAD.sub("", _ANSI.sub("", value))[:limit] or None


# Names and ids, by the length of their column (IdNN: not empty).
Name32 = Annotated[str, name(32)]
Name64 = Annotated[str, name(64)]
Name96 = Annotated[str, name(96)]
Name128 = Annotated[str, name(128)]
Name255 = Annotated[str, name(255)]
Name1024 = Annotated[str, name(1024)]
Id32 = Annotated[str, name(32, min_length=1)]
Id96 = Annotated[str, name(96, min_length=1)]
Id128 = Annotated[str, name(128, min_length=1)]
Id255 = Annotated[str, name(255, min_length=1)]
Text255 = Annotated[str, text(255)]
Text1024 = Annotated[str, text(1024)]
MessageText = Annotated[str, truncated(MESSAGE_MAX), text(MESSAGE_MAX)]
RawText = Annotated[str, truncated(RAW_MAX), text(RAW_MAX)]


# --- numbers ---------------------------------------------------------------------------------
def finite(ge: float, le: float) -> Any:
    """Constraints of a finite float in [ge, le]."""
    return Field(allow_inf_nan=False, ge=ge, le=le)


Int32 = Annotated[int, Field(ge=INT32_MIN, le=INT32_MAX)]
Count32 = Annotated[int, Field(ge=0, le=INT32_MAX)]  # a counter in an Integer column
Count64 = Annotated[int, Field(ge=0, le=INT64_MAX)]  # a counter in a BigInteger column
Percent = Annotated[float, finite(0.0, 100.0)]
MegaBytes = Annotated[float, finite(0.0, 1e9)]  # 1 PB of GPU memory is not a GPU
Watts = Annotated[float, finite(0.0, 1e6)]
Celsius = Annotated[float, finite(-273.15, 1000.0)]
MegaHertz = Annotated[float, finite(0.0, 1e6)]
MilliJoules = Annotated[float, finite(0.0, 1e18)]  # energy since driver load: ~30 years at 1 kW
ExtraValue = Annotated[float, finite(-1e15, 1e15)]  # DCGM profiling fields and other extras
ExtraKey = Annotated[str, name(64, min_length=1)]


# --- times -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class TimeWindow:
    """How far from now the ingest accepts times: observations within [now - max_age_s,
    now + max_ahead_s]; descriptive times (a job's start) only the ahead bound."""

    now: float
    max_age_s: float
    max_ahead_s: float

    @classmethod
    def around_now(cls, *, max_age_s: float, max_ahead_s: float) -> TimeWindow:
        """The window around the current wall clock."""
        return cls(time.time(), max_age_s, max_ahead_s)


def _window(info: ValidationInfo) -> TimeWindow | None:
    ctx = info.context
    return ctx.get(WINDOW_CONTEXT) if isinstance(ctx, dict) else None


def _observed_in_window(ts: float, info: ValidationInfo) -> float:
    window = _window(info)
    if window is not None:
        if ts < window.now - window.max_age_s:
            raise ValueError(f"is more than {window.max_age_s:.0f} s in the past")
        if ts > window.now + window.max_ahead_s:
            raise ValueError(f"is more than {window.max_ahead_s:.0f} s in the future")
    return ts


def _not_ahead(ts: float, info: ValidationInfo) -> float:
    window = _window(info)
    if window is not None and ts > window.now + window.max_ahead_s:
        raise ValueError(f"is more than {window.max_ahead_s:.0f} s in the future")
    return ts


_TS = Field(allow_inf_nan=False, ge=TS_MIN, le=TS_MAX)
# When something was observed (a sample, an event): within the ingest window.
ObservedAt = Annotated[float, _TS, AfterValidator(_observed_in_window)]
# A time that describes a thing (a job's start, a drain): any past time, not the future.
Timestamp = Annotated[float, _TS, AfterValidator(_not_ahead)]


# --- JSON ------------------------------------------------------------------------------------
def check_json(value: Any, *, max_bytes: int, max_depth: int = JSON_MAX_DEPTH) -> Any:
    """`value` unchanged when it is plain JSON within the caps, else ValueError saying why.

    Plain: objects with string keys, arrays, clean strings, finite floats, integers within 64
    bits, booleans and null. Bytes are counted as UTF-8 of the compact encoding.
    """
    size = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > max_depth:
            raise ValueError(f"nests deeper than {max_depth} levels")
        if isinstance(item, dict):
            size += 2 + len(item)  # braces and commas
            for key, sub in item.items():
                if not isinstance(key, str):
                    raise ValueError("has a key that is not a string")
                size += _string_bytes(key) + 1
                stack.append((sub, depth + 1))
        elif isinstance(item, list | tuple):
            size += 2 + len(item)
            stack.extend((sub, depth + 1) for sub in item)
        elif isinstance(item, str):
            size += _string_bytes(item)
        elif item is None or isinstance(item, bool):
            size += 5
        elif isinstance(item, int):
            if not INT64_MIN <= item <= INT64_MAX:
                raise ValueError("holds an integer beyond 64 bits")
            size += 20
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise ValueError("holds a number that is not finite")
            size += 24
        else:
            raise ValueError(f"holds a {type(item).__name__}, which is not JSON")
        if size > max_bytes:
            raise ValueError(f"is over {max_bytes} bytes")
    return value


def _string_bytes(value: str) -> int:
    """Bytes of `value` as a JSON string: UTF-8, quotes, and the characters JSON escapes."""
    if _TEXT_BAD.search(value):
        raise ValueError("holds a string with a NUL or control character")
    try:
        raw = len(value.encode("utf-8"))
    except UnicodeEncodeError:  # a lone surrogate: no database stores it
        raise ValueError("holds a string that is not valid Unicode") from None
    return raw + 2 + sum(value.count(c) for c in _JSON_ESCAPED)


_JSON_ESCAPED = ('"', "\\", "\t", "\n", "\r")


def json_capped(max_bytes: int) -> AfterValidator:
    """A validator: plain JSON within `max_bytes` and JSON_MAX_DEPTH (see check_json)."""
    return AfterValidator(lambda v: check_json(v, max_bytes=max_bytes))


Payload = Annotated[dict[str, Any], json_capped(PAYLOAD_MAX_BYTES)]
JobPayload = Annotated[dict[str, Any], json_capped(JOB_PAYLOAD_MAX_BYTES)]
Taints = Annotated[list[dict[str, Any]], json_capped(LABELS_MAX_BYTES)]
Labels = Annotated[dict[Name255, Text1024], json_capped(LABELS_MAX_BYTES)]
