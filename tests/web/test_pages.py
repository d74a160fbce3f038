"""Every dashboard page on a seeded fleet (both backends): failing from incidents, filters,
links that resolve, hostile strings escaped, compact fleet payload."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from html import unescape

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from tests.conftest import PG_ADMIN_URL, pg_available
from tests.web.seed import HOSTILE, HOSTILE_JOB, Seeded, seed
from timeline import db, service
from timeline.models import Batch, Node
from timeline.settings import Settings
from web.app import create_app
from web.pages import lists

PAGES = [
    "/",
    "/idle",
    "/failing",
    "/incidents",
    "/jobs",
    "/nodes",
    "/remediation",
    "/notifications",
]


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def seeded(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[TestClient, Seeded]]:
    """One seeded database per backend for the whole module (these tests only read)."""
    if request.param == "postgres":
        reason = pg_available()
        if reason:
            if os.environ.get("REQUIRE_POSTGRES") == "1":
                pytest.fail(f"REQUIRE_POSTGRES=1 but {reason}")
            pytest.skip(f"SKIPPED (no PostgreSQL): {reason}")
    with db.scratch_database(request.param, pg_url=PG_ADMIN_URL, prefix="fm_pages") as url:
        db.upgrade(url)
        engine = db.make_engine(url)
        settings = Settings(database_url=url, page_refresh_s=0, idle_min_duration_s=600,
                            data_dir=tmp_path_factory.mktemp("pages"))  # fmt: skip
        fleet = seed(db.make_sessionmaker(engine), settings, nodes=8, history_s=1500)
        yield TestClient(create_app(settings)), fleet
        engine.dispose()


def entity_pages(fleet: Seeded) -> list[str]:
    return [
        f"/incidents/{fleet.failing_incident}",
        f"/incidents/{fleet.user_incident}",
        f"/jobs/{fleet.user_fault_job}",
        f"/jobs/{HOSTILE_JOB}",
        f"/nodes/{fleet.nodes[0]}",
    ]


def _grid(html: str) -> str:
    found = re.search(r'<script type="application/json" id="grid-data">(.*?)</script>', html, re.S)
    assert found is not None
    return found.group(1)


def test_failing_comes_from_node_blamed_incidents_not_from_a_users_xid(
    seeded: tuple[TestClient, Seeded],
) -> None:
    client, fleet = seeded
    nodes = client.get("/api/v1/fleet").json()
    failing = [
        (n["name"], g["index"], g["incident_id"])
        for n in nodes
        for g in n["gpus"]
        if g["state"] == "failing"
    ]
    # Only the GPU that fell off the bus (Xid 79, blame node) is red; the GPU where a user's
    # program hit an illegal memory access (Xid 31, blame job) is not.
    assert failing == [(fleet.nodes[0], 3, fleet.failing_incident)]
    page = client.get("/failing").text
    assert f'href="/incidents/{fleet.failing_incident}"' in page
    assert f'href="/incidents/{fleet.user_incident}"' not in page


def test_every_page_answers_and_every_link_on_it_resolves(
    seeded: tuple[TestClient, Seeded],
) -> None:
    client, fleet = seeded
    links: set[str] = set()
    for path in PAGES + entity_pages(fleet):
        r = client.get(path)
        assert r.status_code == 200, (path, r.text[:300])
        links |= {unescape(h) for h in re.findall(r'href="(/[^"#]*)', r.text)}
    links -= {"/docs", "/metrics", "/login"}
    assert any(h.startswith("/jobs/") for h in links) and any(
        h.startswith("/nodes/") for h in links
    )
    for href in sorted(links):
        assert client.get(href).status_code == 200, href


def test_fleet_filters_narrow_the_grid_and_the_counts(seeded: tuple[TestClient, Seeded]) -> None:
    client, _ = seeded
    everything = client.get("/").text
    total = int(re.search(r'data-gpus="(\d+)"', everything).group(1))  # type: ignore[union-attr]
    assert total == 64
    carol = client.get("/", params={"user": "carol"}).text
    shown = int(re.search(r'data-gpus="(\d+)"', carol).group(1))  # type: ignore[union-attr]
    assert 0 < shown < total
    assert '"carol"' in _grid(carol) and '"alice"' not in _grid(carol)
    none = client.get("/", params={"user": "nobody-at-all"}).text
    assert "No GPU matches these filters" in none


def test_hostile_strings_are_escaped_on_every_page(seeded: tuple[TestClient, Seeded]) -> None:
    client, fleet = seeded
    for path in [*PAGES, *entity_pages(fleet), "/?user=mallory"]:
        html = client.get(path).text
        assert "<script>window.__xss" not in html, path
        assert 'onerror="window.__xss' not in html, path
    job = client.get(f"/jobs/{HOSTILE_JOB}").text
    assert "&lt;script&gt;window.__xss=1&lt;/script&gt;" in job  # shown, as text
    assert HOSTILE not in job


def test_idle_page_lists_the_held_gpus_with_totals_and_sorts(
    seeded: tuple[TestClient, Seeded],
) -> None:
    client, fleet = seeded
    html = client.get("/idle").text
    assert f'data-user="{fleet.idle_user}"' in html
    assert re.search(r'id="idle-hours">(\d+\.\d)', html).group(1) != "0.0"  # type: ignore[union-attr]
    by_user = client.get("/idle", params={"sort": "user", "order": "asc"}).text
    users = re.findall(r'<tr data-user="([^"]*)"', by_user)
    assert users == sorted(users) and users


def test_incident_page_shows_explanation_evidence_and_a_timeline(
    seeded: tuple[TestClient, Seeded],
) -> None:
    client, fleet = seeded
    html = client.get(f"/incidents/{fleet.failing_incident}").text
    assert "fallen off the bus" in html and 'id="fig-timeline"' in html
    assert 'id="actions"' in html and 'id="healer-note"' not in html  # the healer is on
    assert client.get("/incidents/999999").status_code == 404
    # Kubernetes job ids are namespace/name: the page route takes the slash.
    missing = client.get("/jobs/team-a%2Ftrain-1")
    assert missing.status_code == 404 and "team-a/train-1" in missing.text


def test_fleet_page_stays_small_a_few_bytes_per_gpu(seeded: tuple[TestClient, Seeded]) -> None:
    client, _ = seeded
    html = client.get("/").text
    assert html.count("<td") < 200  # no DOM cell per GPU: the grid is one canvas per group
    assert len(_grid(html)) / 64 < 120


def test_time_and_link_filters_never_fail_and_escape_what_they_show() -> None:
    from web.pages import filters

    assert filters.when(None) == "" and filters.when(1e300) == "?" and filters.when("x") == "?"
    assert 'data-ts="0.000"' in filters.when(0)
    assert filters.duration(3725) == "1h 02m" and filters.duration(59) == "59s"
    assert filters.node_link('a"/><script>') == (
        '<a href="/nodes/a%22%2F%3E%3Cscript%3E">a&#34;/&gt;&lt;script&gt;</a>'
    )
    assert filters.gpu_link("n/1", 3) == '<a href="/nodes/n%2F1#gpu-3">GPU 3</a>'


def test_grid_groups_nodes_by_partition_rack_or_nvlink_domain_labels() -> None:
    from timeline.fleet import node_group

    assert node_group({"labels": {"partitions": "gpu,debug"}}) == "partitions=gpu,debug"
    assert node_group({"labels": {"topology.kubernetes.io/rack": "r12"}}) == "rack=r12"
    assert node_group({"labels": {"nvidia.com/gpu.clique": "cl-3.1"}}) == "gpu.clique=cl-3.1"
    assert node_group({"labels": {}}) == "all" and node_group({"labels": None}) == "all"


def test_page_parameters_are_bounded_like_the_api(seeded: tuple[TestClient, Seeded]) -> None:
    client, _ = seeded
    # A NUL would be a PostgreSQL error, not an empty result: refused before any query.
    assert client.get("/incidents", params={"node": "a\x00b"}).status_code == 422
    assert client.get("/incidents/99999999999999999999").status_code == 422
    assert client.get("/jobs/a%00b").status_code == 422
    assert client.get("/nodes/a%01b").status_code == 422
    assert client.get("/idle", params={"hours": "nan"}).status_code == 422
    assert client.get("/api/v1/fleet/heatmap", params={"hours": "inf"}).status_code == 422


def test_job_list_filters_by_user_and_by_part_of_the_id_and_links_each_job(
    seeded: tuple[TestClient, Seeded],
) -> None:
    client, fleet = seeded
    everything = client.get("/jobs").text
    shown = re.findall(r'<tr data-job="([^"]*)"', everything)
    assert fleet.user_fault_job in shown and len(shown) > 2
    assert client.get("/jobs/").status_code == 200  # the list, not a job with an empty id
    row = re.search(rf'<tr data-job="{fleet.user_fault_job}".*?</tr>', everything, re.S)
    assert row is not None
    user = re.findall(r"<td>([^<]*)</td>", row.group(0))[2]  # job, name, state, then user
    theirs = client.get("/jobs", params={"user": user}).text
    rows = re.findall(r'<tr data-job="[^"]*".*?</tr>', theirs, re.S)
    assert fleet.user_fault_job in theirs and all(f"<td>{user}</td>" in r for r in rows)
    assert 0 < len(rows) < len(shown)
    one = client.get("/jobs", params={"q": fleet.user_fault_job}).text
    assert re.findall(r'<tr data-job="([^"]*)"', one) == [fleet.user_fault_job]
    # A user's % matches itself, not everything.
    assert "no job matches" in client.get("/jobs", params={"q": "%"}).text


def test_node_list_shows_every_node_marks_the_blamed_one_and_filters_drains(
    seeded: tuple[TestClient, Seeded],
) -> None:
    client, fleet = seeded
    page = client.get("/nodes").text
    rows = dict(re.findall(r'<tr data-node="([^"]*)" data-drain="([^"]*)"', page))
    assert set(fleet.nodes) <= set(rows)
    blamed = re.search(rf'<tr data-node="{fleet.nodes[0]}"[^>]*class="sev-critical"', page)
    assert blamed is not None  # the node whose GPU fell off the bus
    assert f'data-node="{fleet.nodes[1]}" data-drain="" class="sev-critical"' not in page
    for drained, keep in (("yes", bool), ("no", lambda d: not d)):
        got = dict(re.findall(
            r'<tr data-node="([^"]*)" data-drain="([^"]*)"', client.get(
                "/nodes", params={"drained": drained}).text
        ))  # fmt: skip
        assert got == {n: d for n, d in rows.items() if keep(d)}
    one = client.get("/nodes", params={"q": fleet.nodes[2].upper()}).text
    assert re.findall(r'<tr data-node="([^"]*)"', one) == [fleet.nodes[2]]


def test_node_list_tells_our_drains_from_a_persons(session: Session) -> None:
    service.append_batch(session, batch=Batch(agent="slurm", node="ctl", batch_id="batch-drains",
        nodes=[
            Node(name="n-ours", state="IDLE+DRAIN", reason="fleetmedic: Xid 79 on GPU 3"),
            Node(name="n-person", state="down*", reason="bad cable", reason_user="ann"),
            Node(name="n-up", state="MIXED"),
        ],
    ))  # fmt: skip
    got = lists.nodes_data(session, drained="", text="n-")
    assert {n["name"]: n["drain"] for n in got["nodes"]} == {
        "n-ours": "fleetmedic", "n-person": "person", "n-up": ""
    }  # fmt: skip
    drained = lists.nodes_data(session, drained="yes", text="")["nodes"]
    assert [n["name"] for n in drained] == ["n-ours", "n-person"]
    assert [n["name"] for n in lists.nodes_data(session, drained="no", text="n-")["nodes"]] == [
        "n-up"
    ]
