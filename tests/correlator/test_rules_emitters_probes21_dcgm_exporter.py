"""Probe set twenty-one: dcgm-exporter's metrics as scraped or pasted, read for what they show.

Read from NVIDIA/dcgm-exporter @d5e5f510a1b6: etc/default-counters.csv (DCGM_FI_DEV_XID_ERRORS
"Value of the last XID error encountered", DCGM_FI_DEV_ECC_DBE_VOL_TOTAL, the remapped-row
counters DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS "Number of remapped rows for uncorrectable
errors" and DCGM_FI_DEV_ROW_REMAP_FAILURE "Whether remapping of rows has failed",
DCGM_EXP_XID_ERRORS_COUNT "reported XIDs during last window"); internal/pkg/collector
gpu_collector.go (labels gpu, UUID, pci_bus_id, device, modelName, Hostname, the driver version
label, and on the Xid gauge err_code/err_msg) and xid_collector.go (the "xid" label and
window_size_in_ms). An Xid value reads by the Xid catalog; a value of 0 shows nothing; the node
is the Hostname label. Never a corpus case.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text
from correlator.rules import xid_verdict

HOSTS = ("dgx-h100-031", "gpu-node-3", "ip-10-1-2-3", "nid001234", "a100x8-12")
_UUID = "GPU-8d2c6b6e-1f0a-4f7b-9d44-2f0f7a3b1c9{i}"
# label sets as dcgm-exporter versions print them (3.x with pci_bus_id and the driver label;
# the pod labels of the Kubernetes mapping; a paste trimmed to the labels people keep)
LABELS = (
    'gpu="{i}",UUID="' + _UUID + '",device="nvidia{i}",modelName="NVIDIA H100 80GB HBM3",'
    'Hostname="{host}"',
    'gpu="{i}",UUID="' + _UUID + '",pci_bus_id="00000000:9D:00.0",device="nvidia{i}",'
    'modelName="NVIDIA A100-SXM4-80GB",Hostname="{host}",DCGM_FI_DRIVER_VERSION="550.54.15",'
    'container="trainer",namespace="ml",pod="llm-0"',
    'gpu="{i}", UUID="' + _UUID + '", Hostname="{host}"',
    'Hostname="{host}",gpu="{i}"',
    'gpu="{i}",device="nvidia{i}",modelName="NVIDIA H100 80GB HBM3",Hostname="{host}"',
)
XIDS = (13, 31, 43, 48, 63, 64, 74, 79, 92, 94, 95, 119, 120)


def _labels(n: int, host: str) -> str:
    return LABELS[n % len(LABELS)].format(i=n % 8, host=host)


def _want(xid: int) -> tuple[str | None, str]:
    v = xid_verdict(xid)
    return (v.category.value if v.category else None, v.blame.value)


def _xid_params() -> list[object]:
    out = []
    for n, xid in enumerate(XIDS):
        for k in range(len(LABELS)):
            host = HOSTS[(n + k) % len(HOSTS)]
            labels = _labels(k, host)
            gauge = f"DCGM_FI_DEV_XID_ERRORS{{{labels}}} {xid}\n"
            count = (
                f'DCGM_EXP_XID_ERRORS_COUNT{{{labels},window_size_in_ms="300000",xid="{xid}"}} 1\n'
            )
            out.append(pytest.param(gauge, xid, host, id=f"xid{xid}-gauge-{k}"))
            out.append(pytest.param(count, xid, host, id=f"xid{xid}-count-{k}"))
    return out


@pytest.mark.parametrize(("text", "xid", "node"), _xid_params())
def test_a_dcgm_exporter_xid_reads_by_the_xid_catalog_on_its_hostname(
    text: str, xid: int, node: str
) -> None:
    got = explain_text(text)
    assert (got.category, got.blame, got.xid) == (*_want(xid), xid), (text, got.explanation)
    assert got.node == node, (text, got.explanation)


# the fault counters: (metric, value, verdict)
FAULTS = (
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "2", ("gpu_hardware", "node")),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "1", ("gpu_hardware", "node")),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "4", ("gpu_hardware", "node")),
    ("DCGM_FI_DEV_ROW_REMAP_PENDING", "1", ("gpu_hardware", "node")),
)


@pytest.mark.parametrize(("metric", "value", "want"), FAULTS)
@pytest.mark.parametrize("k", range(len(LABELS)))
def test_a_dcgm_exporter_fault_counter_above_zero_blames_the_hostnames_gpu(
    metric: str, value: str, want: tuple[str, str], k: int
) -> None:
    host = HOSTS[k]
    text = f"# TYPE {metric} counter\n{metric}{{{_labels(k, host)}}} {value}\n"
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == (*want, host), (text, got.explanation)


# a healthy scrape: every fault counter 0, the Xid gauge 0 ("no error"), the window's counter
# with xid="0", temperatures and utilisation; a correctable-error counter alone
HEALTHY_METRICS = (
    ("DCGM_FI_DEV_XID_ERRORS", "", "0"),
    ("DCGM_EXP_XID_ERRORS_COUNT", ',window_size_in_ms="300000",xid="0"', "0"),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "", "0"),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "", "0"),
    ("DCGM_FI_DEV_ROW_REMAP_PENDING", "", "0"),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "", "0"),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "", "3"),
    ("DCGM_FI_DEV_GPU_TEMP", "", "45"),
    ("DCGM_FI_DEV_GPU_UTIL", "", "100"),
)


@pytest.mark.parametrize("k", range(len(LABELS)))
def test_a_healthy_dcgm_exporter_scrape_shows_nothing_and_blames_no_node(k: int) -> None:
    host = HOSTS[k]
    text = "".join(f"{m}{{{_labels(k, host)}{extra}}} {v}\n" for m, extra, v in HEALTHY_METRICS)
    got = explain_text(text)
    assert (got.category, got.blame) == (None, "unknown"), (text, got.explanation)


@pytest.mark.parametrize(("metric", "extra", "value"), HEALTHY_METRICS)
def test_each_healthy_dcgm_exporter_value_alone_shows_nothing(
    metric: str, extra: str, value: str
) -> None:
    text = f"{metric}{{{_labels(1, HOSTS[1])}{extra}}} {value}\n"
    got = explain_text(text)
    assert (got.category, got.blame) == (None, "unknown"), (text, got.explanation)


def test_a_user_xid_in_a_scrape_never_blames_the_node() -> None:
    # Xid 13 and 43 are the application's (catalog); a healthy neighbour GPU adds nothing
    text = (
        f"DCGM_FI_DEV_XID_ERRORS{{{_labels(0, HOSTS[0])}}} 13\n"
        f'DCGM_EXP_XID_ERRORS_COUNT{{{_labels(0, HOSTS[0])},xid="43"}} 2\n'
        f"DCGM_FI_DEV_XID_ERRORS{{{_labels(1, HOSTS[0])}}} 0\n"
    )
    got = explain_text(text)
    assert (got.category, got.blame) == ("user_code", "job"), got.explanation
