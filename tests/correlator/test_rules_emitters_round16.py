"""Round sixteen: NCCL FastSocket's flow-placement fallback, sinfo rows run together on one line,
and NVIDIA Fabric Manager failing to start (in any journal locale). Every line is built from the
emitter's own format (cited in correlator/rules/emitters/nccl.json, slurm.json,
fabric_manager.json and correlator/explain/hosts.py) with made-up values, never a corpus case."""

from __future__ import annotations

import pytest

from correlator.explain import explain_text

# --- google/nccl-fastsocket net_fastsocket.cc ncclSocketAsyncConnectV2 / ncclSocketAcceptV2 ------


def _fs(host: str, body: str) -> str:
    return f"{host}:4300:4325 [0] net_fastsocket.cc:785 NCCL WARN {body}\n"


_CONNECTED = "gpu-a-01:4300:4325 [0] NCCL INFO NET/FastSocket : Connected after 1000 retries.\n"


@pytest.mark.parametrize(
    "body", ["Maximum retry reached for accept 3.", "Maximum retry reached for connect 0."]
)
def test_fastsockets_placement_fallback_is_not_a_failure(body: str) -> None:
    text = _fs("gpu-a-01", "Cannot get incoming CPU.") + _fs("gpu-a-02", body) + _CONNECTED
    assert explain_text(text).category is None


def test_fastsocket_running_out_of_sockets_is_still_an_nccl_error() -> None:
    # "Cannot find empty socket for %d." returns ncclInternalError: the real failure
    text = _fs("gpu-a-01", "Maximum retry reached for connect 3.") + _fs(
        "gpu-a-01", "Cannot find empty socket for 3."
    )
    assert explain_text(text).category == "interconnect"


# --- sinfo's default format "%#P %.5a %.10l %.6D %.6t %N", rows run together -----------------


@pytest.mark.parametrize("state", ["drain*", "drain", "down", "down*", "fail", "drng"])
@pytest.mark.parametrize("limit", ["infinite", "1-00:00:00", "30:00"])
def test_sinfo_rows_pasted_onto_one_line_still_show_nodes_out_of_service(
    state: str, limit: str
) -> None:
    text = (
        "$ sinfo PARTITION AVAIL TIMELIMIT NODES STATE NODELIST "
        f"gpu* up {limit} 12 idle gpu-a-[01-12] gpu* up {limit} 2 {state} gpu-b-[01-02] "
        f"debug up {limit} 4 alloc cpu-[1-4]\n"
    )
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("node", "node", None)


def test_sinfo_rows_on_one_line_that_are_all_in_service_explain_nothing() -> None:
    text = (
        "PARTITION AVAIL TIMELIMIT NODES STATE NODELIST gpu* up infinite 12 idle gpu-a-[01-12] "
        "gpu* up infinite 4 mix gpu-b-[01-04] debug up 30:00 4 alloc cpu-[1-4]\n"
    )
    assert explain_text(text).category is None


def test_prose_about_down_nodes_is_not_an_sinfo_row() -> None:
    assert explain_text("we brought 2 down nodes back up yesterday\n").category is None


# --- NVIDIA Fabric Manager (nv-fabricmanager, nvidia-fabricmanager-start.sh, systemd) --------

_FM_LINES = [
    "nv-fabricmanager[4177]: request to query NVSwitch device information from NVSwitch driver "
    "failed with error:WARNING Nothing to do [NV_WARN_NOTHING_TO_DO]",
    "systemd[1]: nvidia-fabricmanager.service: Control process exited, code=exited, "
    "status=1/FAILURE",
    "systemd[1]: nvidia-fabricmanager.service: Failed with result 'exit-code'.",
    "systemd[1]: Failed to start NVIDIA fabric manager service.",
    'nvidia-fabricmanager-start.sh[4753]: "/usr/bin/nv-fabricmanager -c '
    '/usr/share/nvidia/nvswitch/fabricmanager.cfg" failed! Exit code: 1',
]
# journalctl's short format: strftime("%b %d %H:%M:%S") in the reader's locale
_STAMPS = ["Nov 15 14:15:47", "11月 15 14:15:47", "nov. 15 14:15:47", "ноя 15 14:15:47"]


@pytest.mark.parametrize("line", _FM_LINES)
@pytest.mark.parametrize("stamp", _STAMPS)
def test_fabric_manager_failing_to_start_is_the_nodes(line: str, stamp: str) -> None:
    got = explain_text(f"{stamp} hgx-node-07 {line}\n")
    assert (got.category, got.blame, got.node) == ("node", "node", "hgx-node-07")


def test_fabric_manager_starting_is_not_a_failure() -> None:
    text = (
        "Nov 15 14:15:47 hgx-node-07 systemd[1]: Starting NVIDIA fabric manager service...\n"
        "Nov 15 14:15:55 hgx-node-07 systemd[1]: Started NVIDIA fabric manager service.\n"
    )
    assert explain_text(text).category is None
