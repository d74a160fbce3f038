"""Stored XSS (issue #8, finding 1): every page, rendered in a real headless Chromium with
hostile text in every field a cluster user (or a buggy agent) controls, runs none of it.

Each hostile value carries a script that would call `console.log(N)` with a number unique to
its field and payload; Chromium prints the page's console on stderr, so any N there names the
field and the payload that ran. Pages added elsewhere (incidents, jobs, nodes, idle,
remediation) join the test by adding their URL to PAGES.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from fastapi.testclient import TestClient

from correlator import service as incidents
from correlator.jobs import run_correlator
from correlator.models import AffectedJob, IdleFinding, Incident
from tests.helpers.browser import chromium_path as _chromium
from tests.helpers.browser import headless as _headless
from tests.web.conftest import AGENT_TOKEN
from timeline import queries
from timeline.db import unit_of_work

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# Each {n} becomes the number the script would log. Breakouts from text, from quoted and
# unquoted attributes, from <script> data (JSON for Plotly), from comments and titles.
PAYLOADS = [
    "<script>console.log({n})</script>",
    "<img src=x onerror=console.log({n})>",
    '"><svg onload=console.log({n})>',
    "'><svg onload=console.log({n})>",
    "</script><script>console.log({n})</script>",
    "<!--<script>console.log({n})</script>-->",
    "</title></textarea><svg/onload=console.log({n})>",
    '<iframe srcdoc="<script>parent.console.log({n})</script>"></iframe>',
    "javascript:console.log({n})",
    "<a href=javascript:console.log({n}) id=x{n}>x</a><b onmouseover=console.log({n})>",
]
SHORT = "<svg onload=console.log({n})>"  # for the 32-character fields


@dataclass
class Hostile:
    """Hands out hostile values, each with its own log number, and remembers which is which."""

    start: int = 0
    issued: dict[int, str] = field(default_factory=dict)
    _next: int = 1000

    def __call__(self, what: str, max_length: int = 255) -> str:
        n = self._next
        self._next += 1
        for i in range(len(PAYLOADS)):
            text = PAYLOADS[(self.start + i) % len(PAYLOADS)].format(n=n)
            if len(text) <= max_length:
                break
        else:
            text = SHORT.format(n=n)
        self.issued[n] = f"{what}: {text}"
        return text


# Every page. `{next}` is a hostile login target; `{incident}`, `{job}` and `{node}` are a
# stored incident's id and a hostile job id and node name (URL-quoted).
PAGES = [
    "/",
    "/login?next={next}",
    "/idle",
    "/failing",
    "/incidents",
    "/incidents/{incident}",
    "/jobs",
    "/jobs/{job}",
    "/nodes",
    "/nodes/{node}",
    "/remediation",
    "/notifications",
]


def _round(h: Hostile, r: int, now: float) -> dict[str, Any]:
    """One agent batch with hostile text in every string a node or a user can set."""
    node, job = h(f"node {r}"), h(f"job id {r}", 128)
    uuid = f"GPU-{r}-" + h(f"gpu uuid {r}", 80)
    return {
        "agent": h(f"agent {r}"),
        "node": node,
        "batch_id": f"xss-round-{r:04d}",
        "gpus": [_gpu(h, node, uuid)],
        "samples": [{"ts": now - 5, "gpu_uuid": uuid, "util_gpu": 3.0, "power_w": 80.0}],
        "events": _events(h, r, node, job, uuid, now),
        "jobs": [_job(h, node, job, now)],
        "allocations": [
            {
                "scheduler": "slurm",
                "job_id": job,
                "node": node,
                "gpu_index": 0,
                "gpu_uuid": uuid,
                "start_ts": now - 600,
            }
        ],
        "nodes": [_node(h, node)],
    }


def _gpu(h: Hostile, node: str, uuid: str) -> dict[str, Any]:
    return {
        "uuid": uuid,
        "node": node,
        "index": 0,
        "name": h("gpu name", 128),
        "serial": h("serial", 64),
        "pci_bus_id": h("pci", 32),
        "driver_version": h("driver", 32),
    }


def _events(h: Hostile, r: int, node: str, job: str, uuid: str, now: float) -> list[Any]:
    return [
        {
            "ts": now - 20 - r,
            "node": node,
            "source": h("source", 32),
            "kind": "xid",
            "code": 79,
            "gpu_uuid": uuid,
            "job_id": job,
            "severity": "critical",
            "message": h("event message", 4096),
            "payload": {"text": h("payload")},
        },
        {
            "ts": now - 30 - r,
            "node": node,
            "source": "joblog",
            "kind": "nccl_error",
            "job_id": job,
            "message": h("event message 2", 4096),
            "raw": h("event raw"),
        },
    ]


def _job(h: Hostile, node: str, job: str, now: float) -> dict[str, Any]:
    return {
        "scheduler": "slurm",
        "job_id": job,
        "cluster": h("cluster", 64),
        "name": h("job name"),
        "user": h("user", 128),
        "account": h("account", 128),
        "partition": h("partition", 128),
        "state": "RUNNING",
        "reason": h("job reason"),
        "nodes": [node],
        "start_ts": now - 600,
        "checkpoint_dir": h("checkpoint dir"),
        "wandb_run": h("wandb run"),
        "payload": {"comment": h("job payload")},
    }


def _node(h: Hostile, node: str) -> dict[str, Any]:
    return {
        "name": node,
        "cluster": h("node cluster", 64),
        "state": h("node state", 64),
        "reason": h("node reason"),
        "reason_user": h("drained by", 128),
        "labels": {h("label key"): h("label value")},
        "taints": [{"key": h("taint"), "effect": "NoSchedule"}],
    }


def _stored_findings(h: Hostile, r: int, now: float) -> tuple[Incident, IdleFinding]:
    """An incident and an idle finding whose every text field is hostile (the correlator
    writes these from what it read; the pages must not trust them either)."""
    incident = Incident(
        fingerprint=f"xss-{r}",
        title=h("incident title"),
        kind=h("incident kind", 32),
        category=h("category", 32),
        blame=h("blame", 16),
        culprit_node=h("culprit node"),
        culprit_gpu_uuid=h("culprit gpu", 96),
        culprit_pci_bus_id=h("culprit pci", 32),
        culprit_gpu_index=0,
        job_id=h("incident job", 128),
        opened_ts=now - 50,
        last_seen_ts=now - 40,
        action=h("action"),
        explanation=h("explanation", 4096),
        resolution=h("resolution"),
        details={"note": h("details")},
        affected_jobs=[
            AffectedJob(
                job_id=h("affected job", 128),
                user=h("affected user", 128),
                account=h("affected account", 128),
            )
        ],
    )
    finding = IdleFinding(
        scheduler="slurm",
        job_id=h("idle job", 128),
        user=h("idle user", 128),
        account=h("idle account", 128),
        node=h("idle node"),
        gpu_uuid=h("idle gpu", 96),
        pci_bus_id=h("idle pci", 32),
        gpu_index=0,
        idle_since_ts=now - 7200,
        last_seen_ts=now - 60,
        gpu_hours=2.0,
        cost=4.0,
    )
    return incident, finding


def _seed(url: str, client: TestClient, h: Hostile) -> None:
    now = time.time()
    for r in range(len(PAYLOADS)):
        h.start = r  # round r gives field f payload f + r: every field meets every payload
        body = _round(h, r, now)
        answer = httpx.post(
            f"{url}/api/v1/ingest", json=body, headers={"Authorization": f"Bearer {AGENT_TOKEN}"}
        )
        assert answer.status_code == 200 and not answer.json().get("rejected"), answer.text[:2000]
    app: Any = client.app
    run_correlator(app.state.session_factory, app.state.settings)  # incidents from hostile text
    with unit_of_work(app.state.session_factory) as session:
        stored = [_stored_findings(h, r, now) for r in range(len(PAYLOADS))]
        incidents.save_incidents(session, incidents=[i for i, _ in stored], now=now)
        incidents.save_idle_findings(session, findings=[f for _, f in stored], now=now)


_CONSOLE = re.compile(r'INFO:CONSOLE[^"]*"(\d+)"')


def _scripts_that_ran(chromium: str, url: str, issued: dict[int, str]) -> tuple[list[str], str]:
    """(hostile values whose script ran, the rendered DOM) for one page."""
    done = _headless(chromium, "--enable-logging=stderr", "--v=0", "--dump-dom", url)
    logged = {int(n) for n in _CONSOLE.findall(done.stderr)}
    return [issued[n] for n in sorted(logged & set(issued))], done.stdout


def test_the_detector_sees_a_hostile_script_that_runs(tmp_path: Path) -> None:
    chromium = _chromium()
    page = tmp_path / "unsafe.html"  # what an unescaped template would send
    h = Hostile()
    page.write_text("<html><body>" + "".join(h(f"raw {i}") for i in range(3)) + "</body></html>")
    ran, _ = _scripts_that_ran(chromium, page.as_uri(), h.issued)
    assert len(ran) == 3, ran


@pytest.mark.parametrize("migrated_url", ["sqlite"], indirect=True)
def test_no_page_runs_hostile_text_from_any_field(
    live_server: str, client: TestClient, tmp_path: Path
) -> None:
    chromium = _chromium()
    h = Hostile()
    _seed(live_server, client, h)
    hostile_next = quote("/" + h("login next", 1000), safe="")
    app: Any = client.app
    with app.state.session_factory() as s:  # a stored incident, a hostile job and node
        inc = incidents.list_incidents(s, limit=1)[0]
        job, node = queries.list_jobs(s, limit=1)[0], queries.list_nodes(s)[0]
    ids = {
        "incident": inc.id,
        "job": quote(str(job["job_id"]), safe=""),
        "node": quote(str(node["name"]), safe=""),
    }
    for path in PAGES:
        url = live_server + path.format(next=hostile_next, **ids)
        assert httpx.get(url).status_code == 200, path
        ran, dom = _scripts_that_ran(chromium, url, h.issued)
        assert ran == [], f"{path}: hostile text ran as script: {ran}"
        if path == "/":
            # Shown as text, and the page is whole: the grid, the events, Plotly's drawing.
            assert "&lt;script&gt;console.log(" in dom and 'class="grid"' in dom
            gpus = re.search(r'data-gpus="(\d+)"', dom)
            assert gpus is not None and int(gpus.group(1)) >= 10
            assert 'id="open-incidents"' in dom and "main-svg" in dom
