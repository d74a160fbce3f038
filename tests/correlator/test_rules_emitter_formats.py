"""NCCL's WARN formats, instantiated with the values NCCL can print, against the explain rules.

Every line carries the prefix src/debug.cc writes: "%s:%d:%d " (hostname cut at its first '.',
pid, tid), then "[%d] %s:%d (%s) NCCL WARN %s" (cudaDev, file, line, function) or, in releases
before the function was logged, "[%d] NCCL WARN %s". Peers are printed by ncclSocketToString
(src/misc/socket.cc): "%s<%s>", getnameinfo's host (numeric unless asked otherwise; an IPv6
address bare, never bracketed) and port. Formats, values and verdicts: NVIDIA/nccl @ NCCL_COMMIT.
These are the socket and InfiniBand lines; shared memory, allocation, CUDA and the program's
own mistakes are in test_rules_emitter_formats_nccl_host.py; PyTorch and torchrun in
test_rules_emitter_formats_torch.py, Slurm in ..._slurm.py.
"""

from __future__ import annotations

import pytest

from tests.correlator.emitter_probe import (
    IB,
    NAMED_PEERS,
    NET,
    PEERS,
    Fmt,
    check,
    errnos,
    params,
    warn,
)

SOCKETS = [
    warn(
        "socket-closed",
        "src/misc/socket.cc",
        "ncclSocketProgress",
        "socketProgress: Connection closed by remote peer {peer}",
        NET,
        "peer",
        peer=NAMED_PEERS,
    ),
    # ECONNRESET on recv and EPIPE on send are reported as 'closed'; other errnos are printed
    warn(
        "socket-call-failed",
        "src/os/linux.cc",
        "ncclOsSocketProgressOpt",
        "ncclOsSocketProgressOpt: Call to {op} {peer} failed : {err}",
        NET,
        "peer",
        op=("recv from", "send to"),
        peer=PEERS,
        err=errnos(
            "ETIMEDOUT", "EHOSTUNREACH", "ENETUNREACH", "ECONNREFUSED", "ECONNRESET", "EHOSTDOWN"
        ),
    ),
    # socketConnectCheck's retried errnos: EINTR, EWOULDBLOCK/EAGAIN, ETIMEDOUT, EHOSTUNREACH,
    # ECONNREFUSED; funcName is the caller's __func__
    warn(
        "socket-connect-retries",
        "src/os/linux.cc",
        "socketConnectCheck",
        "{caller}: connect to {peer} returned {err}, exceeded error retry count after {n} attempts",
        NET,
        "peer",
        caller=("ncclOsSocketStartConnect", "ncclOsSocketPollConnect"),
        peer=PEERS,
        err=errnos("EINTR", "EAGAIN", "ETIMEDOUT", "EHOSTUNREACH", "ECONNREFUSED"),
        n=(35, 10, 101),
    ),
    warn(
        "socket-connect-failed",
        "src/os/linux.cc",
        "socketConnectCheck",
        "{caller}: connect to {peer} failed : {err}",
        NET,
        "peer",
        caller=("ncclOsSocketStartConnect", "ncclOsSocketPollConnect"),
        peer=PEERS,
        err=errnos("ENETUNREACH", "ECONNRESET", "EHOSTDOWN", "ECONNABORTED"),
    ),
    warn(
        "socket-accept-retries",
        "src/os/linux.cc",
        "ncclOsSocketTryAccept",
        "ncclOsSocketTryAccept: exceeded error retry count after {n} attempts, {err}",
        NET,
        n=(35, 10),
        err=errnos(
            "ENETDOWN",
            "EPROTO",
            "ENOPROTOOPT",
            "EHOSTDOWN",
            "ENONET",
            "EHOSTUNREACH",
            "EOPNOTSUPP",
            "ENETUNREACH",
            "EINTR",
        ),
    ),
    warn(
        "proxy-op-failed",
        "src/proxy.cc",
        "ncclProxyService",
        "[Proxy Service {rank}] Failed to execute operation {op} from rank {peer}, retcode {rc}",
        NET,
        rank=(0, 5, 63),
        peer=(1, 12, 255),
        rc=(2, 3, 6),
        op=("Init", "SharedInit", "Setup", "Connect", "Start", "Close", "Register", "GetFd"),
    ),
    warn(
        "proxy-recv-polling",
        "src/proxy.cc",
        "ncclPollProxyResponse",
        "Socket recv failed while polling for opId={op}",
        NET,
        op=("0x7f3a1c002b40", "0x55d0"),
    ),
]

IB_LINES = [
    # p2p.cc ncclIbLogCompletionWithError: localGid/remoteGids only on RoCE (link layer Ethernet)
    warn(
        "ib-completion",
        "src/transport/net_ib/p2p.cc",
        "ncclIbLogCompletionWithError",
        "NET/IB: Got completion from peer {peer} with status={st} opcode={op} vendor_err={v}"
        "{gids} hca {hca}",
        IB,
        "host",
        peer=PEERS,
        st=(
            "IBV_WC_RETRY_EXC_ERR(12)",
            "IBV_WC_RNR_RETRY_EXC_ERR(13)",
            "IBV_WC_WR_FLUSH_ERR(5)",
            "IBV_WC_LOC_PROT_ERR(4)",
            "IBV_WC_REM_ACCESS_ERR(10)",
            "IBV_WC_REM_OP_ERR(11)",
            "IBV_WC_LOC_LEN_ERR(1)",
            "IBV_WC_GENERAL_ERR(21)",
        ),
        op=(
            "IBV_WC_RDMA_WRITE(1)",
            "IBV_WC_SEND(0)",
            "IBV_WC_RECV(128)",
            "IBV_WC_RDMA_READ(2)",
            "IBV_WC_RECV_RDMA_WITH_IMM(129)",
        ),
        v=(129, 0, 244, 136),
        gids=(
            "",
            " localGid ::ffff:10.4.0.5 remoteGids::ffff:10.4.0.17",
            " localGid fe80::ba3f:d2ff:fe11:2233 remoteGidsfe80::ba3f:d2ff:fe11:4455",
        ),
        hca=("mlx5_0", "mlx5_bond_1", "ibp24s0", "rocep1s0f0", "bnxt_re3", "irdma0"),
    ),
    warn(
        "ib-async-fatal",
        "src/transport/net_ib/common.cc",
        "ncclIbAsyncThreadMain",
        "NET/IB : {dev_name}:{port} async fatal event{on}: {event}",
        IB,
        "host",
        dev_name=("mlx5_0", "mlx5_bond_1", "ibp24s0", "rocep1s0f0"),
        port=(1, 2),
        on=(
            "",
            " on CQ (0x55d0c1a2b3c0) handle=7 cqe=4096",
            " on QP (0x55d0c1a2b3c0) qpn=4711 handle=3 send_cq=7 recv_cq=8 state=6 sq_psn=0 "
            "rq_psn=0",
        ),
        event=(
            "local catastrophic error",
            "CQ error",
            "local work queue catastrophic error",
            "invalid request local work queue error",
            "local access violation work queue error",
        ),
    ),
    warn(
        "ib-nonfatal-port",
        "src/transport/net_ib/common.cc",
        "ncclIbAsyncThreadMain",
        "NET/IB : {dev_name}:{port} Got non-fatal async event: {event}",
        IB,
        "host",
        dev_name=("mlx5_0", "mlx5_bond_1", "ibp24s0", "rocep1s0f0"),
        port=(1, 2),
        event=("port error(10)", "path migration request error(7)"),
    ),
    warn(
        "ib-fatal-count",
        "src/transport/net_ib/common.cc",
        "ncclIbStatsCheckFatalCount",
        "communicator encountered a fatal error (detected in {f})",
        IB,
        "host",
        f=("ncclIbIsend", "ncclIbIrecv", "ncclIbTest", "ncclIbIflush", "ncclIbConnect"),
    ),
    warn(
        "ibv-call-failed",
        "src/misc/ibvwrap.cc",
        "wrap_ibv_reg_mr",
        "Call to {call} failed with error {err}{tail}",
        IB,
        "host",
        call=(
            "ibv_reg_mr",
            "ibv_create_qp",
            "ibv_create_cq",
            "ibv_reg_dmabuf_mr",
            "ibv_alloc_pd",
            "ibv_query_port",
            "ibv_reg_mr_iova2",
        ),
        err=errnos("ENOMEM", "EINVAL", "EFAULT", "EPERM", "EAGAIN", "ENODEV"),
        tail=("", " errno 12", " errno 22"),
    ),
    warn(
        "ibv-modify-qp",
        "src/misc/ibvwrap.cc",
        "wrap_ibv_modify_qp",
        "Call to ibv_modify_qp failed with {n} {err}, {msg}",
        IB,
        "host",
        n=(110, 22, 12),
        err=errnos("ETIMEDOUT", "EINVAL", "ENOMEM"),
        msg=("qp_state RTR", "qp_state RTS, timeout 20, retry_cnt 7"),
    ),
]

FORMATS = SOCKETS + IB_LINES


@pytest.mark.parametrize(("fmt", "text", "node"), params(FORMATS))
def test_an_nccl_warn_reads_as_its_family_documents(fmt: Fmt, text: str, node: str | None) -> None:
    check(fmt, text, node)
