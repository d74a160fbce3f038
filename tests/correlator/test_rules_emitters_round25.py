"""Round twenty-five: the GPU operator's own daemon pods failing as `kubectl describe pod` shows
them, and Dask's comm timeout naming the peer it could not reach, as their emitters print them.
kubectl's describePod writes "Name:", "Node:\t<node>/<ip>", "Controlled By:\t<Kind>/<name>",
"Init Containers:" / "Containers:", each container's "State:\tWaiting" + "Reason:\t<reason>"
(kubernetes/kubectl pkg/describe/describe.go); the GPU operator names its daemonsets
nvidia-driver-daemonset (init container k8s-driver-manager), nvidia-container-toolkit-daemonset,
nvidia-device-plugin-daemonset, nvidia-operator-validator (NVIDIA/gpu-operator assets/state-*/);
Dask's comm connect() raises "Timed out trying to connect to {addr} after {timeout} s" (older:
"%r ... s: %s") and "Timed out during handshake while connecting to {addr} after {timeout} s"
(dask/distributed distributed/comm/core.py). See correlator/explain/readers_k8s.py and
correlator/rules/emitters/dask.json. Never a corpus case."""

from __future__ import annotations

import pytest

from correlator.explain import explain_text

_DESCRIBE = """\
Name:                 {pod}
Namespace:            gpu-operator
Priority:             2000001000
Node:                 gpu-worker-07/10.20.0.7
Status:               {status}
Controlled By:  DaemonSet/{owner}
Init Containers:
  {init}:
    Image:         nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.6.2
    State:          {state}
      Reason:       {reason}
{rest}Containers:
  main-ctr:
    State:          Waiting
      Reason:       PodInitializing
"""
_LAST_ERROR = """\
    Last State:     Terminated
      Reason:       Error
      Exit Code:    1
    Ready:          False
    Restart Count:  7
"""
_OPERATOR_PODS = (
    ("nvidia-driver-daemonset-v5gqj", "nvidia-driver-daemonset", "k8s-driver-manager"),
    (
        "nvidia-container-toolkit-daemonset-dz2gw",
        "nvidia-container-toolkit-daemonset",
        "driver-validation",
    ),
    (
        "nvidia-device-plugin-daemonset-5crlk",
        "nvidia-device-plugin-daemonset",
        "toolkit-validation",
    ),
    ("nvidia-operator-validator-2z4gn", "nvidia-operator-validator", "driver-validation"),
)


@pytest.mark.parametrize(("pod", "owner", "init"), _OPERATOR_PODS)
def test_a_gpu_operator_pod_whose_init_container_crash_loops_is_the_nodes_gpu_stack(
    pod: str, owner: str, init: str
) -> None:
    text = _DESCRIBE.format(
        pod=pod,
        owner=owner,
        init=init,
        status="Pending",
        state="Waiting",
        reason="CrashLoopBackOff",
        rest=_LAST_ERROR,
    )
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("node", "node", "gpu-worker-07")


def test_a_users_pod_crash_looping_stays_the_jobs_own_crash() -> None:
    text = _DESCRIBE.format(
        pod="trainer-0",
        owner="trainer",
        init="fetch-data",
        status="Pending",
        state="Waiting",
        reason="CrashLoopBackOff",
        rest=_LAST_ERROR,
    )
    got = explain_text(text)
    assert (got.category, got.blame) == ("user_code", "job")


def test_a_gpu_operator_pod_whose_containers_run_shows_no_operator_failure() -> None:
    text = _DESCRIBE.format(
        pod="nvidia-driver-daemonset-v5gqj",
        owner="nvidia-driver-daemonset",
        init="k8s-driver-manager",
        status="Running",
        state="Terminated",
        reason="Completed",
        rest="",
    )
    assert explain_text(text).category is None


@pytest.mark.parametrize(
    ("line", "peer"),
    [
        ("OSError: Timed out trying to connect to tcp://10.0.0.5:8786 after 30 s", "10.0.0.5"),
        (
            "OSError: Timed out trying to connect to 'ucx://172.16.8.240:60998' after 10 s: "
            "connect() didn't finish in time",
            "172.16.8.240",
        ),
        (
            "OSError: Timed out during handshake while connecting to tls://sched-01:8786 "
            "after 10 s",
            "sched-01",
        ),
        (
            "OSError: Timed out trying to connect to tcp://[2001:db8::5]:8786 after 5 s",
            "2001:db8::5",
        ),
    ],
)
def test_a_dask_comm_timeout_is_a_socket_error_on_the_peer_it_names(line: str, peer: str) -> None:
    got = explain_text(f"worker-3$ python run.py\n{line}\n")
    assert (got.category, got.blame, got.node) == ("interconnect", "unknown", peer)


def test_a_dask_timeout_to_an_in_process_address_names_no_host() -> None:
    got = explain_text("OSError: Timed out trying to connect to inproc://10.0.0.5/123/1 after 5 s")
    assert got.category != "interconnect" and got.node is None
