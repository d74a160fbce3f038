"""nv-hostengine that cannot start its server (round forty-four's training miss 988).

Sources (correlator/rules/emitters/dcgm.json, rule dcgm_hostengine_start): NVIDIA/DCGM
hostengine/src/main.cpp @ 2fc25add prints 'Err: Failed to start DCGM Server: %d' when
dcgmEngineRun fails; DCGM 1.x's LwcmServer::run printed 'Failed to start host engine server'
when Serve() failed; NVIDIA/gpu-monitoring-tools' dcgm-exporter script shows nv-hostengine's
stdout in the exporter's log. Either line says the node's DCGM daemon is down: node/node.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text

_EXPORTER_LOG = (
    "Starting NVIDIA host engine...\n"
    "Failed to start host engine server\n"
    "Collecting metrics at /run/prometheus/dcgm.prom every 1000ms...\n"
    "Stopping NVIDIA host engine...\n"
    "Host engine successfully terminated.\n"
    "Done\n"
)


@pytest.mark.parametrize(
    "text",
    [
        _EXPORTER_LOG,
        "Failed to start host engine server\n",
        "Err: Failed to start DCGM Server: -7\n",
        "# nv-hostengine -n --service-account nvidia-dcgm\nErr: Failed to start DCGM Server: -1\n",
    ],
)
def test_a_host_engine_that_cannot_start_its_server_is_the_nodes_daemon(text: str) -> None:
    got = explain_text(text)
    assert (got.category, got.blame) == ("node", "node"), got.explanation


@pytest.mark.parametrize(
    "text",
    [
        "Started host engine version 3.3.5 using port number: 5555\n",
        "Starting NVIDIA host engine...\nHost engine successfully terminated.\nDone\n",
        "Failed to start host engine serverless mode\n",
    ],
)
def test_a_host_engine_that_started_or_stopped_cleanly_is_no_fault(text: str) -> None:
    assert explain_text(text).category is None
