"""Window statistics from VictoriaMetrics' raw export, for windows short enough to read whole."""

from __future__ import annotations

from collections.abc import Sequence

from timeline.vm_client import PREFIX, VmClient


def exported_stats(
    vm: VmClient, selectors: Sequence[str], uuids: set[str], *, since: float, until: float
) -> dict[str, dict[tuple[str, str], float]]:
    """min/max/count/tfirst/tlast per (gpu, field) from the raw samples `selectors` export in
    [since, until], with the rollups' millisecond bounds (the same answers, read whole)."""
    hi = round(until * 1000)
    lo = hi - round((until - since) * 1000)
    got: dict[str, dict[tuple[str, str], float]] = {
        k: {} for k in ("min", "max", "count", "tfirst", "tlast")
    }
    exported = (
        line for sel in selectors for line in vm.export(sel, start=lo / 1000 - 1, end=hi / 1000 + 1)
    )
    for line in exported:
        labels = line["metric"]
        gpu = labels.get("gpu")
        if gpu not in uuids:
            continue
        pairs = [
            (ms, v)
            for ms, v in zip(line["timestamps"], line["values"], strict=True)
            if lo <= ms <= hi and v is not None
        ]
        if not pairs:
            continue
        key = (gpu, labels["__name__"][len(PREFIX) :])
        values = [float(v) for _, v in pairs]
        got["min"][key], got["max"][key] = min(values), max(values)
        got["count"][key] = float(len(pairs))
        got["tfirst"][key] = min(ms for ms, _ in pairs) / 1000.0
        got["tlast"][key] = max(ms for ms, _ in pairs) / 1000.0
    return got
