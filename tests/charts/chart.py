"""Render the Helm chart with Helm's own engine (helm-python-sdk, Helm's Go code, no binary)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.conftest import missing

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "fleetmedic"
RELEASE, NAMESPACE = "fm", "gpu-ops"
# The default values and the chart's ci/ value sets (they double as examples for operators).
VALUE_SETS: dict[str, dict[str, Any]] = {
    "default": {},
    **{p.stem: yaml.safe_load(p.read_text()) for p in sorted((CHART / "ci").glob("*.yaml"))},
}


def helm() -> Any:
    """The helm_python module; skipped loudly when missing (failed where REQUIRE_HELM=1)."""
    try:
        import helm_python
    except ImportError as exc:  # e.g. no wheel for this platform
        missing("REQUIRE_HELM", f"no Helm engine: helm-python-sdk does not load: {exc}")
    return helm_python


def render_text(values: dict[str, Any]) -> dict[str, str]:
    """Template path -> rendered text, as `helm template` (install) would produce them."""
    with helm().Chart.load(CHART) as chart:
        out: dict[str, str] = chart.render(
            values, name=RELEASE, namespace=NAMESPACE, is_install=True
        )
    return out


def render(values: dict[str, Any]) -> list[dict[str, Any]]:
    """Every manifest the chart renders with `values` (NOTES.txt left out)."""
    docs: list[dict[str, Any]] = []
    for path, text in sorted(render_text(values).items()):
        if path.endswith("NOTES.txt"):
            continue
        docs.extend(d for d in yaml.safe_load_all(text) if d)
    return docs


def only(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    """The one manifest of `kind`."""
    found = [d for d in docs if d["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, got {[d['metadata']['name'] for d in found]}"
    return found[0]


def kinds(docs: list[dict[str, Any]]) -> list[str]:
    """The kinds rendered, sorted."""
    return sorted(d["kind"] for d in docs)


def env(container: dict[str, Any]) -> dict[str, Any]:
    """A container's env: name -> value, or the valueFrom mapping."""
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}
