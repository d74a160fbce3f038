"""Probe set twenty-one: leptonai/gpud's Xid and SXid health messages, as gpud words them.

Read from leptonai/gpud @4a8de33a3f02: components/accelerator/nvidia/xid/health_state.go
buildMessage: "XID %d" (for 144-150 "XID %d.%d (err status 0x%08x)"), then the catalog's
mnemonic (catalog_generated.go; the description after it when it differs and is not "Unused"),
then "detected on GPU %s" with the device's "PCI:..." id (" UUID:%s" after it when known);
components/accelerator/nvidia/sxid/health_state.go "SXID %d(%s) detected on %s" / "SXID %d
detected on %s". An Xid reads by the Xid catalog (correlator/rules/xid_catalog.json); the
messages name no host. These pin what explain already did (none failed before). Never a
corpus case.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text
from correlator.rules import xid_verdict

# (Xid, mnemonic, description) as catalog_generated.go lists them
CATALOG = (
    (
        13,
        "ROBUST_CHANNEL_GR_EXCEPTION /\nROBUST_CHANNEL_GR_ERROR_SW_NOTIFY",
        "Graphics Engine Exception",
    ),
    (31, "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT", "GPU memory page fault"),
    (43, "ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR", "GPU stopped processing"),
    (48, "ROBUST_CHANNEL_GPU_ECC_DBE", "Double Bit ECC Error"),
    (63, "INFOROM_DRAM_RETIREMENT_EVENT", "GPU memory remapping event"),
    (64, "INFOROM_DRAM_RETIREMENT_FAILURE", "GPU memory remapping failure"),
    (74, "NVLINK_ERROR", "NVLINK Error"),
    (79, "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "GPU has fallen off the bus"),
    (92, "EXCESSIVE_SBE_INTERRUPTS", "High single-bit ECC error rate"),
    (94, "ROBUST_CHANNEL_CONTAINED_ERROR", "Contained memory error"),
    (95, "ROBUST_CHANNEL_UNCONTAINED_ERROR", "Uncontained memory error"),
    (119, "GSP_RPC_TIMEOUT", "GSP RPC Timeout"),
    (120, "GSP_ERROR", "GSP Error"),
)
GPUS = ("PCI:0000:9b:00", "PCI:0000:18:00 UUID:GPU-8d2c6b6e-1f0a-4f7b-9d44-2f0f7a3b1c9e")


def _params() -> list[object]:
    out = []
    for xid, mnemonic, description in CATALOG:
        for k, gpu in enumerate(GPUS):
            text = f"XID {xid} {mnemonic} {description} detected on GPU {gpu}\n"
            out.append(pytest.param(text, xid, id=f"xid{xid}-{k}"))
    return out


@pytest.mark.parametrize(("text", "xid"), _params())
def test_a_gpud_xid_message_reads_by_the_xid_catalog_and_names_no_node(text: str, xid: int) -> None:
    v = xid_verdict(xid)
    got = explain_text(text)
    want = (v.category.value if v.category else None, v.blame.value, None)
    # the quoted Xid is read by the catalog (xid_quoted.json); explain's `xid` field is filled
    # from Xid events (the driver's line, DCGM's metrics), not from quotes, so it is not pinned
    assert (got.category, got.blame, got.node) == want, (text, got.explanation)


@pytest.mark.parametrize(
    "text",
    [
        "SXID 12028 detected on PCI:0000:9b:00\n",
        "SXID 20034(LTSSM Fault Up) detected on PCI:0000:05:00\n",
    ],
)
def test_a_gpud_sxid_message_is_the_nvswitch_fabric_of_the_node(text: str) -> None:
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("interconnect", "node", None), got.explanation


@pytest.mark.parametrize(
    "text",
    [
        "all 8 GPU(s) were checked, no ECC issue found\n",
        "8 devices support remapped rows and found no issue\n",
        "SXIDComponent is healthy\n",
        "matched 0 xid errors from 1523 kmsg(s)\n",
        "nvidia gpu count matching thresholds (8)\n",
    ],
)
def test_gpud_healthy_reasons_show_nothing(text: str) -> None:
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == (None, "unknown", None), got.explanation
