"""gRPC transport and status errors as the ML stacks riding on gRPC print them (probe set eleven).

Formats, from gRPC's own sources:
- grpc/grpc src/core/load_balancing/pick_first/pick_first.cc @5cfd4aea18: the channel's
  TRANSIENT_FAILURE status, UNAVAILABLE "failed to connect to all addresses; last error: %s" with
  the last subchannel's status (its code, then "<address>: <description>").
- grpc/grpc src/core/lib/iomgr/tcp_client_posix.cc @02899cbbea on_writable: a failed connect's
  description "Failed to connect to remote host: " + the OS error (GRPC_OS_ERROR(so_error,
  "connect"): "connect: Connection refused (111)" in newer releases, the bare strerror text in
  older ones; "Timeout occurred" for a connect past its deadline), with the address in
  kTargetAddress, as grpc_sockaddr_to_uri writes it: "ipv4:10.0.0.7:6379", "ipv6:[fd00::7]:6379"
  (the brackets percent-encoded, "ipv6:%5Bfd00::7%5D:6379", since the URI rewrite), "unix:/path".
- grpc/grpc src/core/lib/iomgr/error.cc @e39d6b76f9 (grpc < 1.50): the JSON an error serialised
  to in debug_error_string ({"created", "description", "file", "file_line", "os_error",
  "syscall", "target_address", "grpc_status", "referenced_errors"}), under the details
  "failed to connect to all addresses" (no "last error" then) or, older still, "Connect Failed".
- grpc/grpc src/core/resolver/dns/native/dns_resolver.cc @dbb5164ac7 and the c-ares wrapper
  (src/core/resolver/dns/c_ares/grpc_ares_wrapper.cc): UNAVAILABLE "DNS resolution failed for
  %s: %s" with the name to resolve (host:port) and the resolver's status, c-ares's "C-ares status
  is not ARES_SUCCESS qtype=%s name=%s is_balancer=%d: %s" (ares_strerror: "Domain name not
  found", "Could not contact DNS servers", "Timeout while contacting DNS servers").
- transport statuses the chttp2 transport and the posix endpoint close a call with (UNAVAILABLE):
  "Socket closed", "Connection reset by peer", "Broken pipe", "keepalive watchdog timeout",
  "GOAWAY received", "Endpoint read failed"; a call past its deadline: DEADLINE_EXCEEDED
  "Deadline Exceeded".
- grpc/grpc src/python/grpcio/grpc/_channel.py @002e1006ef: _NON_OK_RENDEZVOUS_REPR_FORMAT
  '<{} of RPC that terminated with:\\n\\tstatus = {}\\n\\tdetails = "{}"\\n\\tdebug_error_string =
  "{}"\\n>' for _InactiveRpcError and _MultiThreadedRendezvous (grpc.aio's AioRpcError prints the
  same form); since grpc 1.50 the debug string is absl status text, "UNKNOWN:Error received from
  peer ipv4:H:P {grpc_message:"...", grpc_status:14, created_time:"..."}".
Deliveries: the Python exception line of each stack (grpc._channel._InactiveRpcError, JAX's
XlaRuntimeError and TF's UnavailableError / DeadlineExceededError carrying absl::Status text
"UNAVAILABLE: ..."), behind absl's glog prefix, TF's dated prefix and Ray's Python logger
(ray-project/ray python/ray/_private/ray_constants.py @56b106df62 LOGGER_FORMAT
"%(asctime)s\\t%(levelname)s %(filename)s:%(lineno)s -- %(message)s").

Verdicts by the label policy (tests/fixtures/corpus/README.md): a connection that failed or broke
to an address the line names is a socket error, interconnect / unknown, and the culprit is that
remote address (none for loopback, 0.0.0.0 or a unix socket); a transport closed with no address
(or only the call's peer in "Error received from peer", which names the channel's target, not a
failed connection) names no node. A DNS failure is a socket error too, but names no node: a
lookup that failed shows nothing about the named host itself (a wrong address, a host gone from
DNS, the resolver down), and the issue's rule is that evidence that cannot settle blame names
none. A deadline
exceeded is a timeout with no visible cause (nccl_timeout_unknown / unknown, no node) unless the
text also shows a peer unreachable.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text
from tests.correlator.emitter_probe import Fmt, check, params

PICK_FIRST = "grpc/grpc src/core/load_balancing/pick_first/pick_first.cc@5cfd4aea18"
TCP_CLIENT = "grpc/grpc src/core/lib/iomgr/tcp_client_posix.cc@02899cbbea"
ERROR_JSON = "grpc/grpc src/core/lib/iomgr/error.cc@e39d6b76f9"
DNS = "grpc/grpc src/core/resolver/dns/native/dns_resolver.cc@dbb5164ac7"
CHANNEL = "grpc/grpc src/python/grpcio/grpc/_channel.py@002e1006ef"

NET = ("interconnect", "unknown")
TIMEOUT = ("nccl_timeout_unknown", "unknown")

# (as grpc_sockaddr_to_uri prints it, the host it names)
ADDRS = (
    ("ipv4:10.0.0.7:6379", "10.0.0.7"),
    ("ipv6:%5Bfd00::7%5D:6379", "fd00::7"),
    ("ipv4:172.31.12.9:8476", "172.31.12.9"),
    ("ipv6:[2001:db8:12::17]:2222", "2001:db8:12::17"),
    ("ipv4:192.168.100.5:50051", "192.168.100.5"),
)
CONNECT_ERRORS = (
    "Failed to connect to remote host: Connection refused",
    "Failed to connect to remote host: connect: Connection refused (111)",
    "Failed to connect to remote host: connect: No route to host (113)",
    "Failed to connect to remote host: Timeout occurred: FD Shutdown",
    "Failed to connect to remote host: getsockopt(SO_ERROR): Connection timed out (110)",
)
BROKEN = ("Socket closed", "Connection reset by peer", "Broken pipe", "Endpoint read failed")
_TIME = '{{created_time:"2024-05-01T10:00:0{n}.123456789+00:00", grpc_status:14}}'

# how each stack delivers a status: grpcio's repr, absl::Status text in JAX / XLA and TF errors
_RPC_ERROR = (
    "grpc._channel._InactiveRpcError: <_InactiveRpcError of RPC that terminated with:\n",
    "grpc._channel._MultiThreadedRendezvous: <_MultiThreadedRendezvous of RPC that terminated "
    "with:\n",
    "grpc.aio.AioRpcError: <AioRpcError of RPC that terminated with:\n",
)
_REPR = '\tstatus = StatusCode.{code}\n\tdetails = "{details}"\n\tdebug_error_string = "{debug}"\n>'
_STATUS = (
    "jaxlib.xla_extension.XlaRuntimeError: {code}: ",
    "tensorflow.python.framework.errors_impl.{exc}: ",
    "E0501 10:00:03.123456  157988 {file}:{line}] {code}: ",
    "2024-05-01 10:00:03.123456: E tensorflow/core/distributed_runtime/{file}:{line}] {code}: ",
    "2024-05-01 10:00:03,123\tERROR {file}:{line} -- {code}: ",
)
_WHERE = {"file": ("worker.py", "coordination_service_agent.cc", "rpc_util.cc"), "line": (77, 406)}


def rendezvous(key: str, src: str, details: str, debug: str, want: tuple, **values: tuple) -> Fmt:
    """`details` and `debug` as grpcio's RpcError repr prints them, under each class name."""
    return Fmt(
        key,
        src,
        _REPR.replace("{details}", details).replace("{debug}", debug) + "\n",
        {"code": ("UNAVAILABLE",), "n": (1, 4, 7), **values},
        want,
        culprit="addr" if "addr" in values else None,
        prefixes=_RPC_ERROR,
    )


def status(key: str, src: str, body: str, want: tuple, **values: tuple) -> Fmt:
    """An absl::Status text `body` as XLA, TF and Ray's loggers deliver it."""
    return Fmt(
        key,
        src,
        body + "\n",
        {"code": ("UNAVAILABLE",), "exc": ("UnavailableError",), **_WHERE, **values},
        want,
        culprit="addr" if "addr" in values else None,
        prefixes=_STATUS,
    )


_ALL_FAILED = "failed to connect to all addresses; last error: {last}: {addr}: {why}"
_NEW_DEBUG = "UNKNOWN:" + _ALL_FAILED + " " + _TIME
_LAST = {"last": ("UNKNOWN", "UNAVAILABLE"), "addr": ADDRS}

CONNECT = [
    rendezvous("all-failed", PICK_FIRST, _ALL_FAILED, _NEW_DEBUG, NET, why=CONNECT_ERRORS, **_LAST),
    status("all-failed-status", PICK_FIRST, _ALL_FAILED, NET, why=CONNECT_ERRORS, **_LAST),
    # a transport that was up, then broke: the subchannel's last error names the address
    rendezvous("all-failed-broken", PICK_FIRST, _ALL_FAILED, _NEW_DEBUG, NET, why=BROKEN, **_LAST),
    status("all-failed-broken-status", PICK_FIRST, _ALL_FAILED, NET, why=BROKEN, **_LAST),
]

_OLD_JSON = (
    '{{"created":"@1650000000.{n}","description":"Failed to pick subchannel","file":"src/core/ext/'
    'filters/client_channel/client_channel.cc","file_line":3134,"referenced_errors":[{{"created":'
    '"@1650000000.{n}","description":"Failed to connect to remote host: {os}","errno":{errno},'
    '"file":"src/core/lib/iomgr/tcp_client_posix.cc","file_line":200,"os_error":"{os}",'
    '"syscall":"connect","target_address":"{addr}"}}]}}'
)
_OLD = {
    "addr": ADDRS,
    "os": ("Connection refused", "No route to host", "Connection timed out"),
    "errno": (111, 113, 110),
}
OLD_JSON = [
    rendezvous(
        "old-json-all-failed",
        ERROR_JSON,
        "failed to connect to all addresses",
        _OLD_JSON,
        NET,
        **_OLD,
    ),
    rendezvous("old-json-connect-failed", ERROR_JSON, "Connect Failed", _OLD_JSON, NET, **_OLD),
]

_DNS_NAMES = (
    ("ray-head:6379", "ray-head"),
    ("gpu-a-07:8476", "gpu-a-07"),
    (
        "trainer-worker-3.trainer.default.svc.cluster.local:2222",
        "trainer-worker-3.trainer.default.svc.cluster.local",
    ),
    ("node0123:50051", "node0123"),
)
_NOT_FOUND = (
    "C-ares status is not ARES_SUCCESS qtype=A name={host} is_balancer=0: Domain name not found",
    "C-ares status is not ARES_SUCCESS qtype=AAAA name={host}: Domain name not found",
    "UNKNOWN: Name or service not known",
)
_DNS = "DNS resolution failed for {name}: {why}"
_DNS_DEBUG = "UNKNOWN:" + _DNS + " " + _TIME


def _dns_values(names: tuple, whys: tuple) -> dict[str, tuple]:
    # c-ares names the host it queried: fill {host} from the same name; "name", not "addr",
    # since the name that did not resolve is not a culprit
    return {"name": names, "why": whys, "host": tuple(n[1] for n in names)}


DNS_FMTS = [
    rendezvous("dns-not-found", DNS, _DNS, _DNS_DEBUG, NET, **_dns_values(_DNS_NAMES, _NOT_FOUND)),
    status("dns-not-found-status", DNS, _DNS, NET, **_dns_values(_DNS_NAMES, _NOT_FOUND)),
]

_NO_DNS_SERVER = (
    "C-ares status is not ARES_SUCCESS qtype=A name={host} is_balancer=0: Could not contact DNS "
    "servers",
    "C-ares status is not ARES_SUCCESS qtype=SRV name=_grpclb._tcp.{host}: Timeout while "
    "contacting DNS servers",
)
_CLOSED = (*BROKEN, "keepalive watchdog timeout", "GOAWAY received")
_PEER_DEBUG = 'UNKNOWN:Error received from peer {peer} {{grpc_message:"{closed}", grpc_status:14}}'
_PEER = {"peer": ("ipv4:10.0.0.7:6379", "ipv6:%5Bfd00::7%5D:2222", "")}

NO_NODE = [
    # the resolver, not the named host, could not be reached
    rendezvous(
        "dns-no-server",
        DNS,
        _DNS,
        _DNS_DEBUG,
        NET,
        name=tuple(n[0] for n in _DNS_NAMES),
        why=_NO_DNS_SERVER,
        host=tuple(n[1] for n in _DNS_NAMES),
    ),
    rendezvous("transport-closed", CHANNEL, "{closed}", _PEER_DEBUG, NET, closed=_CLOSED, **_PEER),
    status("transport-closed-status", CHANNEL, "{closed}", NET, closed=_CLOSED),
    rendezvous(
        "deadline",
        CHANNEL,
        "Deadline Exceeded",
        'UNKNOWN:Deadline Exceeded {{grpc_status:4, created_time:"2024-05-01T10:00:0{n}"}}',
        TIMEOUT,
        code=("DEADLINE_EXCEEDED",),
    ),
    rendezvous(
        "deadline-from-peer",
        CHANNEL,
        "Deadline Exceeded",
        'UNKNOWN:Error received from peer {peer} {{grpc_message:"Deadline Exceeded", '
        "grpc_status:4}}",
        TIMEOUT,
        code=("DEADLINE_EXCEEDED",),
        **_PEER,
    ),
    status(
        "deadline-status",
        CHANNEL,
        "Deadline Exceeded",
        TIMEOUT,
        code=("DEADLINE_EXCEEDED",),
        exc=("DeadlineExceededError",),
    ),
    Fmt(
        "deadline-tf",
        CHANNEL,
        "Deadline Exceeded\n",
        {},
        TIMEOUT,
        prefixes=("tensorflow.python.framework.errors_impl.DeadlineExceededError: ",),
    ),
]
FORMATS = CONNECT + OLD_JSON + DNS_FMTS + NO_NODE


@pytest.mark.parametrize(("fmt", "text", "node"), params(FORMATS))
def test_a_grpc_status_reads_as_its_source_documents(fmt: Fmt, text: str, node: str | None) -> None:
    check(fmt, text, node)


@pytest.mark.parametrize(("fmt", "text", "node"), params(NO_NODE))
def test_a_grpc_status_naming_no_unreachable_address_names_no_node(
    fmt: Fmt, text: str, node: str | None
) -> None:
    # the call's peer in "Error received from peer" is the channel's target, not evidence
    assert explain_text(text).node is None, (fmt.source, text)


_LOCAL_ADDRS = (
    "ipv4:127.0.0.1:6379",
    "ipv6:%5B::1%5D:50051",
    "ipv4:0.0.0.0:6334",
    "unix:/tmp/ray/session_2024-05-01_10-00-00_123456_1/sockets/raylet",
    "unix-abstract:grpc-coordinator",
)


@pytest.mark.parametrize("addr", _LOCAL_ADDRS)
def test_a_failed_connect_to_a_local_address_is_a_socket_error_naming_no_node(addr: str) -> None:
    text = (
        "grpc._channel._InactiveRpcError: <_InactiveRpcError of RPC that terminated with:\n"
        "\tstatus = StatusCode.UNAVAILABLE\n"
        f'\tdetails = "failed to connect to all addresses; last error: UNKNOWN: {addr}: Failed '
        'to connect to remote host: Connection refused"\n>\n'
    )
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("interconnect", "unknown", None), got.explanation


@pytest.mark.parametrize(
    "name", ["localhost:6379", "localhost:50051", *(printed for printed, _ in _DNS_NAMES)]
)
def test_a_dns_failure_names_no_node(name: str) -> None:
    # a name that did not resolve shows nothing about that host: a wrong address, a host gone
    # from DNS or the resolver down read alike
    got = explain_text(
        f'\tdetails = "DNS resolution failed for {name}: UNKNOWN: Name or service not known"\n'
    )
    assert (got.category, got.blame, got.node) == ("interconnect", "unknown", None), got.explanation


def test_a_deadline_beside_an_unreachable_peer_blames_the_connection_to_that_peer() -> None:
    text = (
        "2024-05-01 10:00:03,123\tERROR worker.py:406 -- RPC failed: StatusCode.DEADLINE_EXCEEDED"
        ' details = "Deadline Exceeded"\n'
        "2024-05-01 10:00:04,001\tERROR worker.py:406 -- UNAVAILABLE: failed to connect to all "
        "addresses; last error: UNKNOWN: ipv4:10.0.0.7:6379: Failed to connect to remote host: "
        "Connection refused\n"
    )
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("interconnect", "unknown", "10.0.0.7"), (
        got.explanation
    )


HEALTHY = [
    # JAX on a host outside GCP: the oauth probe of the metadata server fails, nothing else does
    "E0710 04:40:01.023624401     451 oauth2_credentials.cc:238]            oauth_fetch: "
    "UNKNOWN:C-ares status is not ARES_SUCCESS qtype=A name=metadata.google.internal. "
    'is_balancer=0: Domain name not found {grpc_status:2, created_time:"2024-07-10T04:40:01.0236'
    '05435+00:00"}',
    "E0000 00:00:1730000000.123456   12345 init.cc:229] grpc_wait_for_shutdown_with_timeout() "
    "timed out.",
    "I0501 10:00:00.000000  157988 fork_posix.cc:77] Other threads are currently calling into "
    "gRPC, skipping fork() handlers",
    '<_InactiveRpcError of RPC that terminated with:\n\tstatus = StatusCode.OK\n\tdetails = ""\n>',
    "2024-05-01 10:00:00,123\tINFO worker.py:1749 -- Connecting to existing Ray cluster at "
    "address: 10.0.0.7:6379...",
]


@pytest.mark.parametrize("text", HEALTHY)
def test_a_benign_grpc_line_reads_as_nothing(text: str) -> None:
    got = explain_text(text)
    assert got.explanation.startswith("No failure evidence"), (text, got.explanation)
