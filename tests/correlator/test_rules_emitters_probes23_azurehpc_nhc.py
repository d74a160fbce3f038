"""Probe set twenty-three: Azure's NHC custom checks (azurehpc-health-checks), read as they say.

Read from Azure/azurehpc-health-checks @0e0a1ac26a64: customTests/*.nhc die with
"$FUNCNAME: <message>. FaultCode: NHC<n>" through NHC's die(), so every message is tried behind
the NHC wrappers of probe set twenty-one (log file, syslog, node-mark-offline, the scontrol
reason, SGE). check_gpu_xid quotes the kernel's Xid line (azure_gpu_xid.nhc); check_gpu_ecc's
row-remap and ECC limits (azure_gpu_ecc.nhc); check_gpu_count; check_nvlink_status;
check_nccl_allreduce (one node's GPUs); check_ib_bw_gdr / check_ib_bw_non_gdr /
check_nccl_allreduce_ib_loopback / check_ib_link_flapping (InfiniBand: interconnect/infra, on
the host that logged it, as NHC's own IB port check). Never a corpus case.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text
from correlator.rules import xid_verdict
from tests.correlator.test_rules_emitters_probes21_nhc import HOSTS, WRAPS

GPU = ("gpu_hardware", "node")
NVLINK = ("interconnect", "node")
IB = ("interconnect", "infra")

MESSAGES: tuple[tuple[str, str, tuple[str, str]], ...] = (
    ("remap_pending", "check_gpu_ecc: GPU id 3: Row remap pending. FaultCode: NHC2007", GPU),
    ("remap_error", "check_gpu_ecc: GPU id 0: Row remap error. FaultCode: NHC2007", GPU),
    (
        "remap_count",
        "check_gpu_ecc: GPU id 7: Row remap uncorrectable error count is too high. "
        "FaultCode: NHC2007",
        GPU,
    ),
    (
        "sram_uncorrectable",
        "check_gpu_ecc: GPU id 2: SRAM Uncorrectable ECC error count detected, (1,0). "
        "FaultCode: NHC2019",
        GPU,
    ),
    (
        "dram_high",
        "check_gpu_ecc: GPU id 5: High DRAM Uncorrectable/correctable ECC error count detected, "
        "(0,12,0,30000). FaultCode: NHC2019",
        GPU,
    ),
    ("gpu_count", "check_gpu_count: Expected to see 8 but found 7. FaultCode: NHC2009", GPU),
    ("nvlink_all", "check_nvlink_status: GPU 4 has all nvlinks inactive", NVLINK),
    (
        "nvlink_some",
        "check_nvlink_status: GPU 1 has nvlinks inactive: 3 7 11. FaultCode: NHC2016",
        NVLINK,
    ),
    (
        "nccl_bw",
        "check_nccl_allreduce: NCCL allreduce, BUS BW (expected >=440.0 GB/s, but measured "
        "212.34 GB/s). FaultCode: NHC2010",
        NVLINK,
    ),
    (
        "nccl_oob",
        "check_nccl_allreduce: NCCL allreduce, Out of bounds values failed. FaultCode: NHC2010",
        NVLINK,
    ),
    (
        "ib_gdr",
        "check_ib_bw_gdr: ib_write_bw, IB=mlx5_ib3, mlx5_ib3, IB BW (expected > 380 Gbps, but "
        "measured 96.52 Gbps. FaultCode: NHC2003",
        IB,
    ),
    (
        "ib_non_gdr",
        "check_ib_bw_non_gdr:  IB=mlx5_ib0, IB BW (expected > 380 Gbps, but measured 190.1 Gbps). "
        "FaultCode: NHC2003",
        IB,
    ),
    (
        "ib_loopback",
        "check_nccl_allreduce_ib_loopback: NCCL allreduce, BUS BW (expected >=18.0 GB/s, but "
        "measured 4.2 GB/s). FaultCode: NHC2003",
        IB,
    ),
    (
        "ib_flapping",
        "check_ib_link_flapping: IB link flapping detected. Devices: mlx5_ib2 mlx5_ib5. "
        "FaultCode: NHC2005",
        IB,
    ),
)


def _params(messages: tuple[tuple[str, str, tuple[str, str]], ...]) -> list[object]:
    out = []
    for n, (key, msg, want) in enumerate(messages):
        for k, (wkey, wrap, names) in enumerate(WRAPS):
            host = HOSTS[(n + k) % len(HOSTS)]
            out.append(
                pytest.param(wrap(host, msg), want, host if names else None, id=f"{key}-{wkey}")
            )
    return out


@pytest.mark.parametrize(("text", "want", "node"), _params(MESSAGES))
def test_an_azure_nhc_check_reads_as_its_check_means_on_the_host_it_names(
    text: str, want: tuple[str, str], node: str | None
) -> None:
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == (*want, node), (text, got.explanation)


# azure_gpu_xid.nhc's XID_EC, each as the kernel's NVRM line quoted by check_gpu_xid
XIDS = (48, 56, 57, 58, 62, 63, 64, 65, 68, 69, 73, 74, 79, 80, 81, 92, 119, 120)


def _xid_message(xid: int, host: str) -> str:
    return (
        f"check_gpu_xid: GPU Xid errors detected: Mar 11 09:30:01 {host} kernel: "
        f"[12345.678901] NVRM: Xid (PCI:0000:4c:00): {xid}, pid='<unknown>', name=<unknown>, "
        "Channel 0x00000008. FaultCode: NHC2001"
    )


@pytest.mark.parametrize("xid", XIDS)
def test_an_azure_nhc_xid_check_reads_by_the_xid_catalog(xid: int) -> None:
    host = HOSTS[xid % len(HOSTS)]
    text = f"ERROR:  nhc:  Health check failed:  {_xid_message(xid, host)}\n"
    got = explain_text(text)
    v = xid_verdict(xid)
    want = (v.category.value if v.category else None, v.blame.value)
    assert (got.category, got.blame) == want, (text, got.explanation)


def test_a_passing_azure_health_check_run_shows_nothing() -> None:
    text = (
        "Running health checks using /azure-nhc/conf/nd96isr_h100_v5.conf\n"
        "Node Health Check completed successfully (54s).\n"
    )
    got = explain_text(text)
    assert (got.category, got.blame) == (None, "unknown"), got.explanation
