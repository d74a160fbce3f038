"""InfiniBand verbs asynchronous events (ibv_event_type_str) as NCCL and UCX print them.

Texts from rdma-core libibverbs/enum_strs.c ibv_event_type_str. Formats: NCCL before the
per-event switch (NVIDIA/nccl src/transport/net_ib.cc @f40ce73e89, ncclIbAsyncThreadMain:
WARN("NET/IB : Got async event : %s", str) for every event but IBV_EVENT_COMM_EST, behind
debug.cc's WARN prefix) and UCX's uct/ib/base/ib_device.c uct_ib_device_async_event ("IB Async
event on %s: %s", the event text and " on port %d" for port events, or "%s (%d)").

Verdicts per ib_verbs.json / nccl.json: the fatal events (QP fatal, QP request and access errors,
CQ error, device fatal, SRQ error) and a port error or failed path migration are the host's HCA
or link (interconnect / infra, the printing host); the informational events (port active, P_Key
or SM change, client reregistration, path migrated, send queue drained, last WQE reached, SRQ
limit reached) are no failure.
"""

from __future__ import annotations

import pytest

from tests.correlator.emitter_probe import HOSTS, IB, Fmt, check, params, warn

FATAL = (
    "local work queue catastrophic error",
    "invalid request local work queue error",
    "local access violation work queue error",
    "local catastrophic error",
    "SRQ catastrophic error",
    "CQ error",
)
PORT = ("port error", "path migration request error")
# LID change and GID table change are left out: nccl.json's nccl_ib_async_fatal reads them as
# fatal, which its own meaning ("fatal events") and verbs do not say (see the report)
INFO = (
    "port active",
    "P_Key change",
    "SM change",
    "client reregistration",
    "path migrated",
    "send queue drained",
    "last WQE reached",
    "SRQ limit reached",
)
NOTHING = (None, "unknown")
_SRC = "src/transport/net_ib.cc"
_UCX = "openucx/ucx src/uct/ib/base/ib_device.c uct_ib_device_async_event"
# log.c: "[%lu.%06lu] [%s:%-5d:%d] %16s:%-4u %-4s %-5s %s" (the pid padded to 5)
_UCX_PREFIX = ("[1762045780.123456] [{host}:{pid:<5}:0]      ib_device.c:{line:<4} UCX  {level} ",)


def _old(key: str, events: tuple[str, ...], want: tuple, culprit: str | None) -> Fmt:
    f = warn(
        key,
        _SRC,
        "ncclIbAsyncThreadMain",
        "NET/IB : Got async event : {event}",
        want,
        culprit,
        event=events,
    )
    # the pre-2.19 prefix: the release this format comes from printed no function name
    return Fmt(
        f.key,
        f.source.replace("5067397c26", "f40ce73e89"),
        f.template,
        f.values,
        f.want,
        f.culprit,
        f.prefixes[1:],
    )


def _ucx(key: str, info: tuple[str, ...], level: str, want: tuple) -> Fmt:
    return Fmt(
        key,
        _UCX,
        "IB Async event on {dev}: {info}\n",
        {
            "host": HOSTS,
            "pid": (4711, 90210),
            "line": (321, 412),
            "level": (level,),
            "dev": ("mlx5_0", "mlx5_3", "mlx5_bond_0"),
            "info": info,
        },
        want,
        "host" if want != NOTHING else None,
        _UCX_PREFIX,
    )


# today's NCCL (net_ib/common.cc @5067397c26): "Got non-fatal async event: %s(%d)"
_CODES = {
    "port active": 9,
    "P_Key change": 12,
    "SM change": 13,
    "client reregistration": 17,
    "path migrated": 6,
    "send queue drained": 5,
    "last WQE reached": 16,
    "SRQ limit reached": 15,
}
NEW_INFO = warn(
    "nccl-nonfatal-info",
    "src/transport/net_ib/common.cc",
    "ncclIbAsyncThreadMain",
    "NET/IB : {dev_name}:{port} Got non-fatal async event: {event}",
    NOTHING,
    dev_name=("mlx5_0", "mlx5_bond_1", "ibp24s0"),
    port=(1, 2),
    event=tuple(f"{e}({_CODES[e]})" for e in INFO),
)

FORMATS = [
    NEW_INFO,
    _old("nccl-old-fatal", FATAL, IB, "host"),
    _old("nccl-old-port", PORT, IB, "host"),
    _old("nccl-old-info", INFO, NOTHING, None),
    _ucx("ucx-port-error", tuple(f"port error on port {p}" for p in (1, 2)), "ERROR", IB),
    _ucx(
        "ucx-fatal",
        ("local catastrophic error", "local work queue catastrophic error on QPN 0x1a2b"),
        "ERROR",
        IB,
    ),
    _ucx(
        "ucx-info",
        (
            "port active on port 1",
            "SM change on port 2",
            "client reregistration on port 1",
            "send queue drained (5)",
            "last WQE reached (16)",
        ),
        "WARN",
        NOTHING,
    ),
]


@pytest.mark.parametrize(("fmt", "text", "node"), params(FORMATS))
def test_an_ib_async_event_reads_as_its_family_documents(
    fmt: Fmt, text: str, node: str | None
) -> None:
    check(fmt, text, node)
