"""The chart renders with Helm's engine, lints clean and validates against the Kubernetes
schemas (strict: unknown fields fail) for the default values and every ci/ value set."""

from __future__ import annotations

from typing import Any

import pytest
import typer.main

from tests.charts.chart import CHART, VALUE_SETS, env, helm, kinds, only, render, render_text
from timeline.settings import Settings
from web.auth import Role, TokenTable
from web.cli import app as cli

KUBE_VERSIONS = ("1.25.0", "1.37.0")  # the chart's kubeVersion floor, and the newest schemas
ids = list(VALUE_SETS)
sets = [VALUE_SETS[k] for k in ids]


@pytest.mark.parametrize("values", sets, ids=ids)
def test_lint_is_clean_in_strict_mode(values: dict[str, Any]) -> None:
    report = helm().lint(CHART, values, strict=True)
    problems = [m for m in report["messages"] if m["severity"] >= 2]  # 2 warning, 3 error
    assert report["errors"] == [] and problems == [], report


@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
@pytest.mark.parametrize("values", sets, ids=ids)
def test_every_manifest_validates_strictly(values: dict[str, Any], kube_version: str) -> None:
    import kubernetes_validate

    docs = render(values)
    assert docs
    for doc in docs:
        if doc["kind"] == "ServiceMonitor":
            continue  # a Prometheus Operator CRD: no schema here; test_service_monitor checks it
        try:
            kubernetes_validate.validate(doc, kube_version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            path = ".".join(str(p) for p in exc.path)
            pytest.fail(f"{doc['kind']}/{doc['metadata']['name']}: {path}: {exc.message}")


def test_default_values_render_the_kubernetes_mode_on_sqlite() -> None:
    docs = render({})
    assert kinds(docs) == sorted(
        ["ClusterRole", "ClusterRoleBinding", "DaemonSet", "Deployment",
         "PersistentVolumeClaim", "Secret", "Service", "ServiceAccount", "ServiceAccount"]
    )  # fmt: skip
    server = only(docs, "Deployment")
    assert server["spec"]["replicas"] == 1 and server["spec"]["strategy"]["type"] == "Recreate"
    container = server["spec"]["template"]["spec"]["containers"][0]
    assert "--no-upgrade" not in container["args"]  # it migrates its own SQLite file
    assert env(container)["FLEETMEDIC_KUBERNETES_ENABLED"] == "true"


def test_slurm_mode_renders_the_server_only_with_slurm_reachable() -> None:
    docs = render(VALUE_SETS["slurm-values"])
    assert "DaemonSet" not in kinds(docs) and "ClusterRole" not in kinds(docs)
    pod = only(docs, "Deployment")["spec"]["template"]["spec"]
    container = pod["containers"][0]
    e = env(container)
    assert e["FLEETMEDIC_SLURM_ENABLED"] == "true" and e["FLEETMEDIC_KUBERNETES_ENABLED"] == "false"
    assert e["FLEETMEDIC_SLURM_CONF"] == "/etc/slurm/slurm.conf"
    assert e["FLEETMEDIC_SLURM_BIN_DIR"] == "/usr/bin" and e["FLEETMEDIC_SLURM_CLUSTER"] == "hpc1"
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert mounts["slurm-conf"] == "/etc/slurm"
    assert volumes["slurm-conf"]["configMap"]["name"] == "slurm-conf"
    assert mounts["munge-socket"] == "/run/munge"
    assert volumes["munge-socket"]["hostPath"] == {"path": "/run/munge", "type": "Directory"}
    assert pod["automountServiceAccountToken"] is False  # no Kubernetes API in Slurm mode
    assert pod["nodeSelector"] == {"slurm.example.com/submit-host": "true"}


def test_postgres_gets_a_migration_hook_that_waits_for_the_database() -> None:
    docs = render(VALUE_SETS["replicas-ingress-monitoring-values"])
    job = only(docs, "Job")
    hooks = job["metadata"]["annotations"]
    assert hooks["helm.sh/hook"] == "pre-install,pre-upgrade"
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["args"] == ["db", "upgrade", "--wait", "300"]
    # The URL comes from a hook Secret created before the job (the release's own Secret is not
    # there yet at pre-install).
    ref = env(container)["FLEETMEDIC_DATABASE_URL"]["secretKeyRef"]
    hook_secret = [
        d for d in docs if d["kind"] == "Secret" and d["metadata"]["name"] == ref["name"]
    ]
    assert len(hook_secret) == 1 and ref["key"] in hook_secret[0]["stringData"]
    weights = int(hook_secret[0]["metadata"]["annotations"]["helm.sh/hook-weight"])
    assert weights < int(hooks["helm.sh/hook-weight"])
    server = only(docs, "Deployment")
    assert server["spec"]["replicas"] == 3
    assert "--no-upgrade" in server["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "PersistentVolumeClaim" not in kinds(docs)


def test_existing_secrets_are_used_and_the_chart_renders_none_of_its_own() -> None:
    docs = render(VALUE_SETS["existing-secrets-values"])
    assert [d["metadata"]["name"] for d in docs if d["kind"] == "Secret"] == []
    server = env(only(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0])
    db_ref = {"name": "fleetmedic-db", "key": "url"}
    assert server["FLEETMEDIC_DATABASE_URL"]["secretKeyRef"] == db_ref
    assert server["FLEETMEDIC_AGENT_TOKENS"]["secretKeyRef"]["name"] == "fleetmedic-tokens"
    job = env(only(docs, "Job")["spec"]["template"]["spec"]["containers"][0])
    assert job["FLEETMEDIC_DATABASE_URL"]["secretKeyRef"] == db_ref
    agent = env(only(docs, "DaemonSet")["spec"]["template"]["spec"]["containers"][0])
    assert agent["FLEETMEDIC_AGENT_TOKEN"]["secretKeyRef"]["name"] == "fleetmedic-tokens"


@pytest.mark.parametrize(
    "tokens", [[], ["bound-token-0123456789abcdef@gpu-node-*", "other-token-0123456789abcdef"]]
)
def test_the_agents_token_is_one_the_server_accepts_for_its_nodes(tokens: list[str]) -> None:
    secret = only(render({"auth": {"agentTokens": tokens}}), "Secret")["stringData"]
    if not tokens:  # generated
        assert len(secret["agent-token"]) == 48
    table = TokenTable.from_settings(Settings(agent_tokens=secret["agent-tokens"]))
    principal = table.lookup(secret["agent-token"])
    assert principal is not None and principal.role is Role.AGENT
    assert principal.node_glob in (None, "gpu-node-*")


def test_more_than_one_replica_on_sqlite_is_refused() -> None:
    with pytest.raises(Exception, match="database"):
        render({"server": {"replicas": 2}})


def test_values_the_schema_does_not_know_are_refused() -> None:
    with pytest.raises(Exception, match=r"sourcez|additional properties"):
        render({"agent": {"sourcez": ["nvml"]}})
    with pytest.raises(Exception, match="mode"):
        render({"mode": "nomad"})


def test_settings_maps_become_fleetmedic_variables_of_real_settings() -> None:
    docs = render(VALUE_SETS["replicas-ingress-monitoring-values"])
    e = env(only(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0])
    assert e["FLEETMEDIC_CORRELATOR_INTERVAL_S"] == "0.5"
    assert e["FLEETMEDIC_KUBERNETES_USER_KEYS"] == "team.example.com/user,user"
    Settings.model_validate({})  # the names below must be fields of Settings
    fields = set(Settings.model_fields)
    for values in sets:
        for doc in render(values):
            for name in _env_names(doc):
                if name.startswith("FLEETMEDIC_"):
                    assert name.removeprefix("FLEETMEDIC_").lower() in fields, name


def _env_names(doc: dict[str, Any]) -> list[str]:
    spec = doc.get("spec", {}).get("template", {}).get("spec", {})
    return [e["name"] for c in spec.get("containers", []) for e in c.get("env", [])]


@pytest.mark.parametrize("values", sets, ids=ids)
def test_the_commands_in_the_manifests_are_ones_the_cli_accepts(values: dict[str, Any]) -> None:
    group = typer.main.get_command(cli)
    for doc in render(values):
        spec = doc.get("spec", {}).get("template", {}).get("spec", {})
        for container in spec.get("containers", []):
            args = list(container["args"])
            command = group
            while args and args[0] in getattr(command, "commands", {}):
                command = command.commands[args.pop(0)]  # type: ignore[attr-defined]
            command.make_context(command.name or "fleetmedic", args)  # raises on a bad option


def test_service_monitor_scrapes_the_servers_metrics_port() -> None:
    docs = render(VALUE_SETS["replicas-ingress-monitoring-values"])
    monitor, service = only(docs, "ServiceMonitor"), only(docs, "Service")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items()
    ports = {p["name"] for p in service["spec"]["ports"]}
    assert [(e["port"], e["path"]) for e in monitor["spec"]["endpoints"]] == [("http", "/metrics")]
    assert "http" in ports
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"


def test_ingress_routes_to_the_server_service() -> None:
    docs = render(VALUE_SETS["replicas-ingress-monitoring-values"])
    ingress, service = only(docs, "Ingress"), only(docs, "Service")
    rule = ingress["spec"]["rules"][0]
    assert rule["host"] == "fleetmedic.gpu.example.com"
    backend = rule["http"]["paths"][0]["backend"]["service"]
    assert backend == {"name": service["metadata"]["name"], "port": {"name": "http"}}
    assert ingress["spec"]["tls"][0]["secretName"] == "fleetmedic-tls"


@pytest.mark.parametrize("values", sets, ids=ids)
def test_notes_render(values: dict[str, Any]) -> None:
    notes = render_text(values)["fleetmedic/templates/NOTES.txt"]
    assert "fleetmedic" in notes and "agent-token" in notes
