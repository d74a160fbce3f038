"""The rows of VictoriaMetrics' import API for GPU samples, and sample values read back typed.

One series per GPU and field (the `ROW` series marks each sample's time), labelled with the
GPU's uuid and node.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Boolean, Float

from timeline import tables
from timeline.models import SampleRow
from timeline.vm_client import ROW, metric

# Every sample field but `extra` (not kept here); its type is the SQL column's, so a value read
# back comes out as the SQL store gives it.
FIELDS = tuple(f for f in tables.SAMPLE_FIELDS if f != "extra")
FLOAT_FIELDS = frozenset(f for f in FIELDS if isinstance(tables.samples.c[f].type, Float))
BOOL_FIELDS = frozenset(f for f in FIELDS if isinstance(tables.samples.c[f].type, Boolean))


def typed(field: str, value: float) -> Any:
    """A value read back as the SQL column's type gives it (bool, float or int)."""
    if field in BOOL_FIELDS:
        return value != 0.0
    if field in FLOAT_FIELDS:
        return value
    return int(value)


def import_lines_of(node: str, samples: Sequence[SampleRow]) -> list[dict[str, Any]]:
    """Import lines of one node's samples: one per GPU and field."""
    series: dict[tuple[str, str], tuple[list[float], list[int]]] = defaultdict(lambda: ([], []))
    for s in samples:
        ms = round(s.ts * 1000)
        for field in (ROW, *FIELDS):
            value = 1 if field == ROW else getattr(s, field)
            if value is None:
                continue
            values, stamps = series[(s.gpu_uuid, field)]
            values.append(float(value))
            stamps.append(ms)
    return [
        {
            "metric": {"__name__": metric(field), "gpu": gpu, "node": node},
            "values": values,
            "timestamps": stamps,
        }
        for (gpu, field), (values, stamps) in series.items()
    ]
