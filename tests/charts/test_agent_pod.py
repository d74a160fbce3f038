"""The agent DaemonSet's pod gives the agent what it reads: NVML through the NVIDIA runtime,
/dev/kmsg, the host's /proc, a spool that outlives the pod, and the token and server URL."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from tests.charts.chart import NAMESPACE, VALUE_SETS, env, only, render
from timeline.settings import Settings


def _agent(values: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    docs = render(values)
    pod = only(docs, "DaemonSet")["spec"]["template"]["spec"]
    assert len(pod["containers"]) == 1
    return docs, pod, pod["containers"][0]


def _mount(pod: dict[str, Any], container: dict[str, Any], path: str) -> tuple[dict, dict]:
    """The volume mount serving `path` (itself or a parent folder) and its volume."""
    target = PurePosixPath(path)
    for m in container["volumeMounts"]:
        if (
            target == PurePosixPath(m["mountPath"])
            or PurePosixPath(m["mountPath"]) in target.parents
        ):
            volume = next(v for v in pod["volumes"] if v["name"] == m["name"])
            return m, volume
    raise AssertionError(f"nothing is mounted at {path}")


def test_nvml_comes_from_the_nvidia_runtime_without_taking_a_gpu() -> None:
    _, pod, container = _agent({})
    assert pod["runtimeClassName"] == "nvidia"
    e = env(container)
    assert e["NVIDIA_VISIBLE_DEVICES"] == "all"
    assert "utility" in e["NVIDIA_DRIVER_CAPABILITIES"].split(",")  # libnvidia-ml
    resources = container["resources"]
    assert not any("nvidia.com" in k for part in resources.values() for k in part)
    assert container["args"][:1] == ["agent"] and "nvml" in container["args"]


def test_kmsg_is_the_hosts_device_read_only_in_a_privileged_container() -> None:
    _, pod, container = _agent({})
    e = env(container)
    mount, volume = _mount(pod, container, e["FLEETMEDIC_AGENT_KMSG_PATH"])
    assert mount["mountPath"] == "/dev/kmsg" and mount["readOnly"] is True
    assert volume["hostPath"] == {"path": "/dev/kmsg", "type": "CharDevice"}
    # The runtime's device allow-list has no /dev/kmsg: only a privileged container opens it.
    assert container["securityContext"]["privileged"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True


def test_the_hosts_proc_maps_gpu_processes_to_pods() -> None:
    _, pod, container = _agent({})
    mount, volume = _mount(pod, container, env(container)["FLEETMEDIC_AGENT_PROC_ROOT"])
    assert mount["readOnly"] is True
    assert volume["hostPath"]["path"] == "/proc"


def test_every_path_the_agent_writes_is_a_volume_and_the_spool_outlives_the_pod() -> None:
    _, pod, container = _agent({})
    e = env(container)
    spool = e["FLEETMEDIC_AGENT_SPOOL_PATH"]
    _, volume = _mount(pod, container, spool)
    assert volume["hostPath"] == {"path": "/var/lib/fleetmedic-agent", "type": "DirectoryOrCreate"}
    _mount(pod, container, e["FLEETMEDIC_DATA_DIR"])  # the kmsg cursor lives beside the spool
    _mount(pod, container, "/tmp")
    assert container["securityContext"]["readOnlyRootFilesystem"] is True


def test_the_agent_sends_to_the_service_with_a_token_the_server_accepts() -> None:
    docs, pod, container = _agent({})
    e = env(container)
    service = only(docs, "Service")
    port = service["spec"]["ports"][0]["port"]
    assert e["FLEETMEDIC_AGENT_SERVER_URL"] == (
        f"http://{service['metadata']['name']}.{NAMESPACE}.svc:{port}"
    )
    ref = e["FLEETMEDIC_AGENT_TOKEN"]["secretKeyRef"]
    secret = only(docs, "Secret")
    assert secret["metadata"]["name"] == ref["name"]
    assert secret["stringData"][ref["key"]] in secret["stringData"]["agent-tokens"].split(",")
    server = env(only(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0])
    assert server["FLEETMEDIC_AGENT_TOKENS"]["secretKeyRef"] == {
        "name": ref["name"],
        "key": "agent-tokens",
    }
    assert e["FLEETMEDIC_AGENT_NODE"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    assert pod["automountServiceAccountToken"] is False  # the agent has no Kubernetes API access


def test_it_runs_on_gpu_nodes_and_tolerates_their_taint() -> None:
    _, pod, _ = _agent({})
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod[
        "tolerations"
    ]


# Peak RSS of `fleetmedic agent` (fake NVML, 8 GPUs, + kmsg/replay; 90 s; 2026-11-23, under
# shared load): 55.8-56.4 MB. See values.yaml.
MEASURED_AGENT_RSS_MIB = 56.4 * 1e6 / 2**20


def _mib(quantity: str) -> float:
    assert quantity.endswith("Mi"), quantity
    return float(quantity.removesuffix("Mi"))


def test_its_memory_request_covers_the_measured_peak_and_the_limit_leaves_room() -> None:
    _, _, container = _agent({})
    resources = container["resources"]
    assert _mib(resources["requests"]["memory"]) >= MEASURED_AGENT_RSS_MIB
    assert _mib(resources["limits"]["memory"]) >= 4 * MEASURED_AGENT_RSS_MIB  # real NVML, spool
    assert resources["requests"]["cpu"] == "50m"  # measured 9-22 millicores on average


def test_without_kmsg_the_agent_has_no_privilege_and_no_capability() -> None:
    _, pod, container = _agent(VALUE_SETS["existing-secrets-values"])
    sc = container["securityContext"]
    assert sc["privileged"] is False and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert all(m["mountPath"] != "/dev/kmsg" for m in container["volumeMounts"])
    assert "kmsg" not in container["args"] and "runtimeClassName" not in pod


def test_agent_settings_are_real_agent_settings() -> None:
    _, _, container = _agent(VALUE_SETS["replicas-ingress-monitoring-values"])
    names = {k.removeprefix("FLEETMEDIC_").lower() for k in env(container) if "FLEETMEDIC_" in k}
    assert names <= set(Settings.model_fields)
    assert env(container)["FLEETMEDIC_AGENT_SLOW_EVERY"] == "12"
