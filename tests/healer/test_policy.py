"""The policy: defaults that only observe, files in TOML and YAML, modes, the breaker's cap."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from correlator.models import Incident
from healer.models import ActionKind, ActionMode
from healer.policy import Policy, PolicyError, PolicyFile, load_policy


def incident(category: str, blame: str = "node", code: int | None = None, conf: float = 0.95):
    return Incident(
        fingerprint="f",
        category=category,
        blame=blame,
        title="t",
        code=code,
        opened_ts=0.0,
        last_seen_ts=0.0,
        confidence=conf,
    )


def test_a_new_install_observes_everything_and_acts_nowhere() -> None:
    policy = load_policy(None)
    rule = policy.rule_for(incident("gpu_hardware"))
    assert rule is not None and rule.actions == ["drain", "recover", "notify"]
    for kind in ActionKind:
        mode = policy.mode_for(kind=kind, cluster="c", partition="p", confidence=1.0, rule=rule)
        assert mode is ActionMode.OBSERVE


@pytest.mark.parametrize(
    ("category", "blame", "actions"),
    [
        ("gpu_hardware", "node", ["drain", "recover", "notify"]),
        ("node", "node", ["drain", "recover", "notify"]),
        ("interconnect", "infra", ["drain", "notify"]),
        ("user_code", "job", ["notify"]),
        ("oom_gpu", "job", ["notify"]),
        ("oom_host", "job", ["notify"]),
        ("nccl_timeout_unknown", "unknown", ["recover", "notify"]),
        ("scheduler", "infra", []),
    ],
)
def test_default_rules_follow_the_issue(category: str, blame: str, actions: list[str]) -> None:
    rule = Policy().rule_for(incident(category, blame))
    assert rule is not None and [a.value for a in rule.actions] == actions


def test_hardware_with_unknown_blame_matches_no_rule_so_nothing_is_done() -> None:
    assert Policy().rule_for(incident("gpu_hardware", "unknown")) is None


def test_interconnect_drains_only_after_three_occurrences_and_nccl_recovers_once() -> None:
    p = Policy()
    inter, nccl = p.rule_for(incident("interconnect")), p.rule_for(incident("nccl_timeout_unknown"))
    assert inter is not None and inter.occurrences == 3
    assert nccl is not None and nccl.max_recoveries == 1


def test_acting_is_switched_on_per_cluster_partition_and_kind(tmp_path: Path) -> None:
    f = tmp_path / "policy.toml"
    f.write_text(
        "min_confidence = 0.9\n"
        '[[act]]\ncluster = "prod"\npartition = "gpu*"\nkinds = ["drain", "recover"]\n'
        '[[act]]\ncluster = "prod"\nkinds = ["notify"]\napproval = true\n'
    )
    p = load_policy(f)
    rule = p.rule_for(incident("gpu_hardware"))

    def mode(kind: ActionKind, cluster: str = "prod", part: str = "gpu-a", conf: float = 0.95):
        return p.mode_for(kind=kind, cluster=cluster, partition=part, confidence=conf, rule=rule)

    assert mode(ActionKind.DRAIN) is ActionMode.ACT
    assert mode(ActionKind.DRAIN, part="cpu") is ActionMode.OBSERVE
    assert mode(ActionKind.DRAIN, cluster="dev") is ActionMode.OBSERVE
    assert mode(ActionKind.RETURN) is ActionMode.OBSERVE
    assert mode(ActionKind.NOTIFY) is ActionMode.APPROVAL
    assert mode(ActionKind.DRAIN, conf=0.85) is ActionMode.PROPOSED  # below 0.9: only proposed


def test_yaml_policy_overrides_rules_and_limits(tmp_path: Path) -> None:
    f = tmp_path / "policy.yaml"
    f.write_text(
        "breaker_max_nodes: 2\nrequeue_budget: 1\n"
        "rules:\n  - name: only-xid-79\n    category: gpu_hardware\n    codes: [79]\n"
        "    actions: [drain]\n"
    )
    p = load_policy(f)
    assert (p.breaker_max_nodes, p.requeue_budget) == (2, 1)
    assert p.rule_for(incident("gpu_hardware", code=79)) is not None
    assert p.rule_for(incident("gpu_hardware", code=48)) is None


def test_a_bad_policy_file_is_a_clear_error(tmp_path: Path) -> None:
    f = tmp_path / "p.toml"
    f.write_text("breaker_max_node = 3\n")  # a typo must not pass silently
    with pytest.raises(PolicyError, match="breaker_max_node"):
        load_policy(f)
    f.write_text("[[act\n")
    with pytest.raises(PolicyError, match="cannot read"):
        load_policy(f)


def test_breaker_cap_is_the_smaller_of_n_nodes_and_the_share_but_at_least_one() -> None:
    p = Policy()  # 5 nodes or 10 %
    assert [p.breaker_cap(n) for n in (0, 3, 10, 40, 1000)] == [5, 1, 1, 4, 5]


def test_policy_file_is_reread_when_changed_and_a_broken_edit_keeps_the_last_good(
    tmp_path: Path,
) -> None:
    f = tmp_path / "p.toml"
    f.write_text("breaker_max_nodes = 3\n")
    pf = PolicyFile(f)
    assert pf.current().breaker_max_nodes == 3
    f.write_text("breaker_max_nodes = 4\n")
    os.utime(f, (time.time() + 5, time.time() + 5))
    assert pf.current().breaker_max_nodes == 4
    f.write_text("breaker_max_nodes = 'many'\n")
    os.utime(f, (time.time() + 10, time.time() + 10))
    assert pf.current().breaker_max_nodes == 4 and pf.error is not None
