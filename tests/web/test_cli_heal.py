"""`fleetmedic heal status|plan|approve|reject|reset-breaker|backtest` on a real store."""

from __future__ import annotations

import json
import time
from pathlib import Path

from sqlalchemy.orm import Session, sessionmaker
from typer.testing import CliRunner

from healer import service
from healer.jobs import heal_once
from healer.policy import Policy, Scope
from healer.steps import HealerContext
from tests.healer.helpers import XID31, XID79, cluster, fault, running_job
from web.cli import app
from web.cli.heal import parse_span

runner = CliRunner()


def _planned(factory: sessionmaker[Session], policy: Policy) -> None:
    cluster(factory, nodes=["node1", "node2"])
    now = time.time()
    running_job(factory, "4242", ["node1"], start=now - 600)
    fault(factory, XID79, node="node1", ts=now)
    heal_once(HealerContext(factory=factory, policy=policy))


def test_plan_shows_what_a_new_install_would_do_and_status_sums_it_up(
    migrated_url: str, session_factory: sessionmaker[Session]
) -> None:
    _planned(session_factory, Policy())
    out = runner.invoke(app, ["heal", "plan", "--database-url", migrated_url])
    assert out.exit_code == 0, out.output
    lines = out.output.strip().splitlines()
    assert [line.split()[1:4] for line in lines] == [
        ["planned", "observe", "drain"],
        ["planned", "observe", "recover"],
        ["planned", "observe", "notify"],
    ]
    assert "fleetmedic: gpu_hardware Xid 79" in lines[0]
    status = runner.invoke(app, ["heal", "status", "--json", "--database-url", migrated_url])
    doc = json.loads(status.output)
    assert doc["breaker"]["tripped"] is False and doc["nodes_kept_out"] == []
    assert {(c["action"], c["result"], c["count"]) for c in doc["actions"]} == {
        ("drain", "planned", 1),
        ("recover", "planned", 1),
        ("notify", "planned", 1),
    }


def test_approve_and_reject_from_the_command_line(
    migrated_url: str, session_factory: sessionmaker[Session]
) -> None:
    _planned(session_factory, Policy(act=[Scope(approval=True)]))
    with session_factory() as s:
        ids = {a.kind.value: a.id for a in service.list_actions(s)}
    ok = runner.invoke(
        app,
        [
            "heal",
            "approve",
            str(ids["drain"]),
            "--by",
            "admin:dave",
            "--database-url",
            migrated_url,
        ],
    )
    assert ok.exit_code == 0 and "approved by admin:dave" in ok.output
    no = runner.invoke(app, ["heal", "reject", str(ids["recover"]), "--database-url", migrated_url])
    assert no.exit_code == 0 and "rejected by cli:" in no.output and "cancelled" in no.output
    again = runner.invoke(
        app, ["heal", "approve", str(ids["drain"]), "--database-url", migrated_url]
    )
    assert again.exit_code == 1 and "is approved" in again.output
    missing = runner.invoke(app, ["heal", "reject", "99999", "--database-url", migrated_url])
    assert missing.exit_code == 1 and "no action 99999" in missing.output
    reset = runner.invoke(
        app, ["heal", "reset-breaker", "--by", "x", "--database-url", migrated_url]
    )
    assert reset.exit_code == 0 and "epoch 1" in reset.output


def test_backtest_tries_a_policy_file_on_stored_incidents(
    migrated_url: str, session_factory: sessionmaker[Session], tmp_path: Path
) -> None:
    cluster(session_factory, nodes=["node1", "node2", "node3"])
    now = time.time()
    running_job(session_factory, "1", ["node1"], start=now - 600)
    fault(session_factory, XID79, node="node1", ts=now - 100)
    fault(session_factory, XID79, node="node2", ts=now - 50, bus="0000:5d:00")
    fault(session_factory, XID31, node="node3", ts=now - 10)
    policy = tmp_path / "p.toml"
    policy.write_text("breaker_max_nodes = 1\n")
    out = runner.invoke(
        app,
        [
            "heal",
            "backtest",
            "--since",
            "1d",
            "--policy",
            str(policy),
            "--database-url",
            migrated_url,
        ],
    )
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert (doc["incidents"], doc["drains"], doc["drains_blocked_by_breaker"]) == (3, 1, 1)
    assert doc["breaker_trips"] == 1 and doc["by_rule"]["user-fault"] == 1
    assert doc["nodes_kept_out"] == ["node1"] and doc["recoveries"] == 1
    policy.write_text("breaker_max_node = 1\n")
    bad = runner.invoke(
        app, ["heal", "backtest", "--policy", str(policy), "--database-url", migrated_url]
    )
    assert bad.exit_code == 2 and "breaker_max_node" in bad.output


def test_spans_read_like_people_write_them() -> None:
    assert [parse_span(x) for x in ("7d", "12h", "90m", "30s", "3600", "1w")] == [
        604800,
        43200,
        5400,
        30,
        3600,
        604800,
    ]
