"""DCGM's DCGM_FR_* messages, filled with the values DCGM can print, against the explain rules.

Formats: dcgmlib/dcgm_errors.h (NVIDIA/DCGM @ DCGM_COMMIT), the *_MSG strings dcgmi diag and the
health watches print (DCGM_ERROR_FORMAT_MESSAGE), filled with several GPU ids, counts, NVLink
error field names, field tags (dcgmlib/src/dcgm_fields.cpp) and floats as %.1f/%.2f/%.2e print
them. Each line is printed bare, in dcgmi diag's result table ("| Warning | ...") and in
`dcgmi diag -j`'s "warning" field. The verdicts are dcgm.json's, which follow each code's NEXT
step and severity in the same header (isolate/reset/reboot: the GPU on the node; monitor or
"verify your setting": not settled). DCGM_FR_NCCL_ERROR (129) is left out: its %s is NCCL's
own text, read by the NCCL family.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from tests.correlator.emitter_probe import Fmt, check, params

DCGM_COMMIT = "72fa3feaa67d716a75323a8f47c34ff3ee73f824"
_SRC = f"NVIDIA/DCGM dcgmlib/dcgm_errors.h@{DCGM_COMMIT[:10]}"
G_NODE, G_UNKNOWN = ("gpu_hardware", "node"), ("gpu_hardware", "unknown")
NET_NODE, NODE = ("interconnect", "node"), ("node", "node")
_GPUS = (0, 3, 7, 12, 15)
_PREFIXES = ("", "| Warning                   | ", '"warning" : "')
# NVLink error field names the NvLink plugin and health watch print (CRC FLIT, CRC Data, ...)
_NVL_FIELDS = ("CRC FLIT", "CRC Data", "Replay", "Recovery")
_P2P_TEST = ("Peer-to-peer bandwidth test", "p2p memory test", "")


def dcgm(
    key: str, code: int, msg: str, want: tuple[str | None, str], **values: Sequence[Any]
) -> Fmt:
    """DCGM_FR code `code`'s *_MSG `msg` (str.format placeholders for its printf fields)."""
    return Fmt(
        key=f"{code}-{key}",
        source=_SRC,
        template=msg + "\n",
        values={"gpu": _GPUS, **values},
        want=want,
        prefixes=_PREFIXES,
    )


def _p2p(code: int, msg: str) -> Fmt:
    return dcgm("p2p", code, msg, G_NODE, peer=(1, 5, 9), test=_P2P_TEST)


MEMORY = [
    dcgm("dbe", 4, "Detected {n} volatile double-bit ECC error(s) in GPU {gpu}.", G_NODE,
         n=(1, 2, 17)),
    dcgm("sbe", 5, "More than {n} single-bit ECC error(s) detected in GPU {gpu} Volatile SBEs: {d}",
         G_UNKNOWN, n=(10, 1000), d=(11, 1504, 99999)),
    dcgm("pending-page", 6, "A pending retired page has been detected in GPU {gpu}.", G_NODE),
    dcgm("pages-limit", 7, "{n} or more retired pages have been detected in GPU {gpu}. ", G_NODE,
         n=(60, 64, 128)),
    dcgm("pages-dbe", 8, "An excess of {n} retired pages due to DBEs have been detected and more "
         "than one page has been retired due to DBEs in the past week in GPU {gpu}.", G_NODE,
         n=(15, 32)),
    dcgm("inforom", 9, "A corrupt InfoROM has been detected in GPU {gpu}.", G_NODE),
    dcgm("faulty", 52, "Found {n} faulty memory elements on GPU {gpu}", G_NODE, n=(1, 12, 4096)),
    dcgm("cuda-dbe", 57, "CUDA APIs have indicated that a double-bit ECC error has occured on GPU "
         "{gpu}.", G_NODE),
    dcgm("mismatch", 58, "A memory mismatch was detected on GPU {gpu}, but no error was reported "
         "by CUDA or NVML.", G_NODE),
    dcgm("l1tag", 79, "Detected a miscompare failure in the L1 cache.", G_NODE),
    dcgm("remap-fail", 80, "GPU {gpu} had uncorrectable memory errors and row remapping failed.",
         G_NODE),
    dcgm("uncontained", 81, "GPU had an uncontained error (XID 95)", G_NODE),
    dcgm("dbe-pending", 83, "Pending page retirements together with a DBE were detected on GPU "
         "{gpu}.", G_NODE),
    dcgm("remapped", 84, "GPU {gpu} had uncorrectable memory errors and {n} rows were remapped",
         G_NODE, n=(1, 8, 512)),
    dcgm("remap-pending", 85, "GPU {gpu} had memory errors and row remappings are pending", G_NODE),
    _p2p(86, "GPU {gpu} was unsuccessfully written to by GPU {peer} in a peer-to-peer test: "
         "{test}"),
    _p2p(87, "GPU {gpu} unsuccessfully wrote data to GPU {peer} in a peer-to-peer test: {test}"),
    _p2p(113, "GPU {gpu} was unsuccessfully written to by GPU {peer} over PCIe in a peer-to-peer "
         "test: {test}"),
    _p2p(116, "GPU {gpu} unsuccessfully wrote data to GPU {peer} over NVLink in a peer-to-peer "
         "test: {test}"),
    dcgm("nan", 111, "Found {n} NaN-value memory elements on GPU {gpu}", G_NODE, n=(1, 77)),
    dcgm("sram", 118, "SRAM Threshold Count exceeded on GPU {gpu}: {n}", G_NODE, n=(4, 12, 1000)),
    dcgm("remap-limit", 132, "GPU {gpu} exceeded uncorrectable row remap limit with {n} remapped "
         "rows", G_NODE, n=(512, 1024)),
    dcgm("contained", 131, "GPU had a contained error.", G_UNKNOWN),
    dcgm("fallen", 120, "GPU {gpu} has fallen off the bus", G_NODE),
]  # fmt: skip

# dcgm_fields.cpp tags: the *_VIOLATION codes print the field's tag
_DBE_TAGS = ("ecc_dbe_volatile_total", "ecc_dbe_aggregate_total")
_SBE_TAGS = ("ecc_sbe_volatile_total", "ecc_sbe_aggregate_total")
FIELDS = [
    dcgm("dbe", 103, "Detected {n} {tag} for GPU {gpu}", G_NODE, n=(1, 3), tag=_DBE_TAGS),
    dcgm("dbe-threshold", 106, "Detected {n} {tag} for GPU {gpu} which is above the threshold {t}",
         G_NODE, n=(5, 12), tag=_DBE_TAGS, t=(0, 4)),
    dcgm("sbe", 102, "Detected {n} {tag} for GPU {gpu}", G_UNKNOWN, n=(1, 250), tag=_SBE_TAGS),
    dcgm("sbe-threshold", 105, "Detected {n} {tag} for GPU {gpu} which is above the threshold {t}",
         G_UNKNOWN, n=(101, 5000), tag=_SBE_TAGS, t=(100,)),
    dcgm("replay", 104, "Detected {n} {tag} for GPU {gpu}", G_NODE, n=(1, 86),
         tag=("pcie_replay_counter",)),
    dcgm("replay-threshold", 107, "Detected {n} {tag} for GPU {gpu} which is above the threshold "
         "{t}", G_NODE, n=(9, 120), tag=("pcie_replay_counter",), t=(8,)),
    dcgm("threshold-dbl", 36, "Detected {x} {tag} for {grp}:{gpu} which is above the threshold {t}",
         G_UNKNOWN, x=("93.5", "1204.0"), tag=("gpu_temp", "power_usage", "memory_temp"),
         grp=("GPU", "gpu"), t=("87.0", "700.0")),
]  # fmt: skip

LINKS = [
    dcgm("threshold", 13, "Detected {n} {f} NvLink errors on GPU {gpu}'s NVLink which exceeds "
         "threshold of {t}", NET_NODE, n=(101, 4096), f=_NVL_FIELDS, t=(100, 0)),
    dcgm("down", 14, "GPU {gpu}'s NvLink link {link} is currently down", NET_NODE,
         link=(0, 5, 17)),
    dcgm("sw-fatal", 15, "Detected fatal errors on NvSwitch {sw} link {link}", NET_NODE,
         sw=(0, 3, 5), link=(12, 47, 63)),
    dcgm("sw-nonfatal", 16, "Detected nonfatal errors on NvSwitch {sw} link {link}", NET_NODE,
         sw=(1, 4), link=(2, 36)),
    dcgm("crc", 70, "{x} {f} NvLink errors found occuring per second on GPU {gpu}, exceeding the "
         "limit of 100 per second.", NET_NODE, x=("101.0", "2048.5"), f=_NVL_FIELDS),
    dcgm("critical", 71, "Detected {n} {f} NvLink errors on GPU {gpu}'s NVLink (should be 0)",
         NET_NODE, n=(1, 9), f=_NVL_FIELDS),
    dcgm("links-up", 99, "Only {n} NvLinks are up out of the expected {m}", NET_NODE, n=(0, 11, 17),
         m=(12, 18)),
    dcgm("sw-links-up", 100, "NvSwitch {sw} - Only {n} NvLinks are up out of the expected {m}",
         NET_NODE, sw=(0, 2, 5), n=(30, 60), m=(64, 32)),
    dcgm("sxid", 109, "Detected fatal NvSwitch SXID {s}", NET_NODE, s=(12028, 20034, 24007)),
    dcgm("eff-ber", 119, "Detected effective BER {b} exceeds minimum threshold on GPU {gpu}'s "
         "NVLink.", NET_NODE, b=("1.20e-09", "3.57e-12", "1.00e+00")),
    dcgm("sym-ber", 121, "Detected symbol BER {b} exceeds minimum threshold on GPU {gpu}'s NVLink.",
         NET_NODE, b=("2.41e-06", "9.99e-05")),
    dcgm("fm-training", 112, "Fabric Manager (Cluster UUID: {u}, Clique ID: {c}, Health Mask: "
         "{m}): {s}.", NET_NODE, u=("6b1f0e2a-90d3-4c1e-8d55-0f1a2b3c4d5e", "N/A"), c=(0, 32767),
         m=("0x1", "0x24", "0"), s=("Training not completed", "Incorrect configuration")),
    dcgm("fabric-probe", 123, "GPU {gpu}: Fabric State is {st}.", NET_NODE,
         st=("Not Started (1)", "In Progress (2)")),
    dcgm("pcie-rate", 3, "Detected more than {n} PCIe replays per minute for GPU {gpu} : {d}",
         G_NODE, n=(8, 16), d=(9, 4711)),
    dcgm("pcie-gen", 45, "GPU {gpu} is running at PCI link generation {g}, which is below the "
         "minimum allowed link generation of {m} (parameter '{p}')", G_NODE, g=(1, 3), m=(4, 5),
         p=("pcie.min_pci_generation",)),
    dcgm("pcie-width", 46, "GPU {gpu} is running at PCI link width {w}X, which is below the "
         "minimum allowed link generation of {m} (parameter '{p}')", G_NODE, w=(1, 4, 8),
         m=(16,), p=("pcie.min_pci_width",)),
    dcgm("pcie-host", 98, "GPU {gpu} host-side PCIe replay violation, see dmesg for more "
         "information", G_NODE),
]  # fmt: skip

_ACTIONS = ("GPU_RESET", "NODE_REBOOT", "DRAIN_P2P", "DRAIN_AND_RESET")
STATE = [
    dcgm("thermal", 10, "Detected clocks event due to thermal violation in GPU {gpu}.", G_NODE),
    dcgm("power-unreadable", 11, "Cannot reliably read the power usage for GPU {gpu}.", G_UNKNOWN),
    dcgm("power", 12, "Detected clocks event due to power violation in GPU {gpu}.", G_UNKNOWN),
    dcgm("thermal-total", 40, "There were thermal violations totaling {x} seconds for GPU {gpu}",
         G_NODE, x=("0.5", "12.0", "301.7")),
    dcgm("thermal-ts", 41, "Thermal violations totaling {x} seconds started at {s} seconds into "
         "the test for GPU {gpu}", G_NODE, x=("3.0", "42.5"), s=("0.0", "118.2")),
    dcgm("temp", 42, "Temperature {t} of GPU {gpu} exceeded user-specified maximum allowed "
         "temperature {m}", G_NODE, t=(91, 104), m=(85, 90)),
    dcgm("bandwidth", 30, "Bandwidth of GPU {gpu} in direction {d} of {x} did not exceed minimum "
         "required bandwidth of {y}.", G_UNKNOWN, d=("h2d", "d2h", "bidir"),
         x=("3.21", "11.50"), y=("12.00", "20.00")),
    dcgm("stress", 50, "Max stress level of {x} did not reach desired stress level of {y} for GPU "
         "{gpu}", G_UNKNOWN, x=("4012.3", "88.0"), y=("5000.0",)),
    dcgm("mem-bw", 62, "GPU {gpu} only achieved a memory bandwidth of {x} GB/s, failing to meet "
         "{y} GB/s for test {t}", G_UNKNOWN, x=("1204.55", "90.10"), y=("2400.00",), t=(0, 3)),
    dcgm("target-power", 63, "Max power of {x} did not reach desired power minimum {tag} of {y} "
         "for GPU {gpu}", G_UNKNOWN, x=("402.1", "150.0"), tag=("target_power",),
         y=("500.0", "680.0")),
    dcgm("gflops", 110, "Detected {x} {tag} for GPU {gpu} which is below the threshold {y}",
         G_UNKNOWN, x=("41230.55", "12.00"), tag=("gflops",), y=("50000.00",)),
    dcgm("unbound", 54, "Cuda GPU {gpu} is no longer bound to a CUDA context...Aborting", G_NODE),
    # the CUDA driver's cuGetErrorString text of the failed cuCtxCreate / cuDeviceGet
    dcgm("cuda-device", 59, "Unable to find a corresponding CUDA device for GPU {gpu}: '{e}'",
         G_NODE, e=("initialization error", "unknown error", "invalid device ordinal")),
    dcgm("cuda-context", 66, "GPU {gpu} failed to create a CUDA context: {e}", G_NODE,
         e=("initialization error", "unknown error", "invalid device ordinal")),
    dcgm("recovery", 125, "GPU {gpu} requires a reset to recover from a fault. Recovery action: "
         "{n} (GPU_RESET).", G_NODE, n=(1,)),
    dcgm("reboot", 126, "GPU {gpu} fault may have left the OS in an inconsistent state. Recovery "
         "action: {n} (NODE_REBOOT).", G_NODE, n=(2,)),
    dcgm("drain-p2p", 127, "GPU {gpu} requires peer-to-peer traffic to be quiesced. Recovery "
         "action: {n} (DRAIN_P2P).", G_NODE, n=(3,)),
    dcgm("drain-reset", 128, "GPU {gpu} operating at reduced capacity due to a fault. Recovery "
         "action: {n} (DRAIN_AND_RESET).", G_NODE, n=(4,)),
    dcgm("ecc-pending", 61, "ECC memory for GPU {gpu} is in a pending state.", NODE),
    dcgm("persistence", 29, "Persistence mode for GPU {gpu} is disabled.", NODE),
    dcgm("count", 20, "The number of devices NVML returns is different than the number of devices "
         "in /dev.", NODE),
    dcgm("denylist", 23, "Found driver on the denylist: {d}", NODE, d=("nouveau", "nvidiafb")),
    dcgm("nvml-lib", 22, "Cannot open library {lib}: '{e}'", NODE,
         lib=("libnvidia-ml.so.1", "libnvidia-ml.so"),
         e=("libnvidia-ml.so.1: cannot open shared object file: No such file or directory",)),
]  # fmt: skip

FORMATS = MEMORY + FIELDS + LINKS + STATE


@pytest.mark.parametrize(("fmt", "text", "node"), params(FORMATS))
def test_a_dcgm_message_reads_as_dcgm_json_documents(fmt: Fmt, text: str, node: str | None) -> None:
    check(fmt, text, node)
