"""The failing lines the delivery-wrapper tests wrap (test_explain_wrappers.py and
test_explain_wrappers_aggregators.py): each reads alone as its own verdict."""

from __future__ import annotations

ILLEGAL = "RuntimeError: CUDA error: an illegal memory access was encountered"
ECC = "RuntimeError: CUDA error: uncorrectable ECC error encountered"
XID = "NVRM: Xid (PCI:0000:3b:00): 79, pid=2841, name=python, GPU has fallen off the bus."
TIMEOUT = (
    "[E ProcessGroupNCCL.cpp:563] [Rank 3] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=4521, OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, "
    "Timeout(ms)=600000) ran for 600043 milliseconds before timing out."
)
