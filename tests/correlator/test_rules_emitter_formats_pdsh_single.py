"""Probe set twenty-six (pdsh): one pdsh-relayed line whose text is itself a fault names its host.

pdsh writes each remote line as "%S: %s", the host and the line as it came (chaos/pdsh
src/pdsh/dsh.c _flush_lines @21f59962d44a: outf ("%S: %s", th->host, buf)), so `pdsh -w
gpu-n12 'nhc'` or `pdsh -w gpu-n12 'dmesg | grep Xid'` that finds one fault prints one line.
A lone "name: " opening is read as pdsh's only when what follows is a fault message a rule
reads by itself (NHC's die() "ERROR:  $NAME:  Health check failed:  $*", mej/nhc nhc
@9c4a38c0c9f4; the driver's "NVRM: Xid (PCI:...): N, ..."; nvidia-smi's NVML
failures), never for an exception's class, a compiler's or interpreter's argv0 or a kernel
device name ("nvidia-nvswitch3: SXid ...", printed by the NVSwitch driver itself), nor for
"error: ..." / "RuntimeError: ..." lines, whose opening word has no digit or is a log level.
Verdicts are those the rules give the same line without pdsh's prefix. Never a corpus case.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text
from tests.correlator.emitter_probe import HOSTS

FAULTS = (
    "ERROR:  nhc:  Health check failed:  check_hw_ib:  No IB port mlx5_0:1 is ACTIVE "
    "(LinkUp 100 Gb/sec).",
    "ERROR:  nhc:  Health check failed:  check_gpu_count:  Expected to see 8 but found 7",
    "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.",
    "NVRM: Xid (PCI:0000:b3:00): 48, pid=8812, name=python3, An uncorrectable double bit "
    "error (DBE) has been detected on GPU in the framebuffer at partition 3, subpartition 0.",
    "Unable to determine the device handle for GPU 0000:1C:00.0: Unknown Error",
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure "
    "that the latest NVIDIA driver is installed and running.",
)


@pytest.mark.parametrize(
    ("host", "fault"),
    [(h, FAULTS[i % len(FAULTS)]) for i, h in enumerate(HOSTS)]
    + [("10.4.0.17", FAULTS[2]), ("worker-1", FAULTS[0])],
)
def test_one_pdsh_line_that_is_itself_a_fault_names_its_host(host: str, fault: str) -> None:
    bare, relayed = explain_text(fault + "\n"), explain_text(f"{host}: {fault}\n")
    assert bare.category is not None
    assert (relayed.category, relayed.blame) == (bare.category, bare.blame)
    assert relayed.node == host


@pytest.mark.parametrize(
    "line",
    (
        # exceptions, log levels and launchers' own words: no digit, or a level, before ": "
        "RuntimeError: CUDA error: uncorrectable ECC error encountered",
        "error: CUDA error: uncorrectable ECC error encountered",
        "error3: CUDA error: uncorrectable ECC error encountered",
        "rank3: NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.",
        # the NVSwitch driver's own device name in front of its SXid
        "nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 40 egress "
        "non-posted PRIV error (First)",
        # a Java exception class with a digit, quoting a fault Spark reports
        "Py4JJavaError: An error occurred while calling o123.fit. : ExecutorLostFailure "
        "(executor 3 exited caused by one of the running tasks) Reason: Container killed by "
        "YARN for exceeding memory limits",
        "python3: NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the "
        "bus.",
        "gpu0: CUDA error: uncorrectable ECC error encountered",
    ),
)
def test_a_word_before_a_fault_that_no_pdsh_host_wrote_names_no_host(line: str) -> None:
    got = explain_text(line + "\n")
    assert got.category is not None
    assert got.node is None


def test_one_pdsh_line_that_reads_as_nothing_names_no_host() -> None:
    # an nvidia-smi CSV row relayed alone: no rule reads it, so the prefix settles nothing
    assert explain_text("gpu-n12: 0, NVIDIA H100 80GB HBM3, 00000000:19:00.0, 3\n").node is None


def test_two_hosts_relaying_the_same_fault_name_no_host() -> None:
    fault = FAULTS[0]
    got = explain_text(f"gpu-n12: {fault}\ngpu-n13: {fault}\n")
    assert got.category is not None
    assert got.node is None
