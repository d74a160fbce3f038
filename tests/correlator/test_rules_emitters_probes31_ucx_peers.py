"""Probe set forty-three (UCX): an endpoint timeout behind a peer's own crash (issue #11).

Read from openucx/ucx @9466d104a317 (never a corpus case):
- src/ucs/debug/log.c: UCS_LOG_FMT "[%lu.%06lu] [%s:%-5d:%s] %17s:%-4u %-4s %-5s %*s%s" (time,
  host, pid, thread; file, line, "UCX", the level), each line of a message under that prefix;
  ucs_log_fatal_error's "[%s:%-5d:%s:%d] " (host, pid, thread name, tid) in front of
  src/ucs/debug/assert.c's "%13s:%-4u %s" and assert.h ucs_fatal's "Fatal: ";
- src/uct/ib/mlx5/ib_mlx5_log.c uct_ib_mlx5_completion_with_err: "%s on %s:%d/%s (synd 0x%x vend
  0x%x hw_synd %d/%d)" then "%s QP 0x%x wqe[%d]: %s %s" (the peer only as "[rqpn 0x%x dlid=%d
  sl=%d port=%d src_path_bits=%d]", ib_log.c / ib_device.c uct_ib_ah_attr_str), the syndromes
  "Transport retry count exceeded", "Receive-no-ready retry count exceeded", "Remote side
  aborted" read as UCS_ERR_ENDPOINT_TIMEOUT; before the rework "Error on QP 0x%x wqe[%d]: %s
  (synd 0x%x vend 0x%x) opcode %s";
- src/uct/ib/rc/verbs/rc_verbs_iface.c: "send completion with error: %s [qpn 0x%x wrid 0x%lx
  vendor_err 0x%x]" of ibv_wc_status_str;
- src/ucp/core/ucp_ep.c: "ep %p: error '%s' on %s will not be handled since no error callback
  is installed" (ucs_status_string: "Endpoint timeout"; the lane as "<tl>/<device>");
- src/uct/ib/ud/base/ud_ep.c: "UD endpoint %p to %s:%d: unhandled timeout error" (the peer's
  ucs_get_host_name() and pid with debug data, "<no debug data>" without).
The peer's own ends are built as the other probe sets build them: UCX's "Caught signal %d (%s)"
(src/ucs/debug/debug.c), the kernel's segfault and OOM-kill lines, NVRM's Xid 79, a CUDA error
behind pdsh's "host: " prefix (chaos/pdsh src/pdsh/dsh.c).
A timeout that names no host is read as the one other host's crash when exactly one such host
shows one; the printer of a timeout is never the culprit of it.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text

A, B, C = "gpu-a-01", "gpu-b-02", "gpu-c-03"
_T = "[1717236031.123456]"


def _ucx(host: str, where: str, msg: str) -> str:
    return f"{_T} [{host}:12345:0] {where:>17}  UCX  ERROR {msg}\n"


def _lines(host: str) -> dict[str, str]:
    """Each UCX timeout form as `host` prints it."""
    return {
        "mlx5_retry": _ucx(
            host,
            "ib_mlx5_log.c:177",
            "Transport retry count exceeded on mlx5_0:1/IB (synd 0x15 vend 0x81 hw_synd 0/0)",
        )
        + _ucx(
            host,
            "ib_mlx5_log.c:177",
            "RC QP 0x1a2b wqe[1234]: SEND s-e [inl len 10] [rqpn 0x5678 dlid=12 sl=0 port=1 "
            "src_path_bits=0]",
        ),
        "mlx5_rnr": _ucx(
            host,
            "ib_mlx5_log.c:177",
            "Receive-no-ready retry count exceeded on mlx5_2:1/RoCE (synd 0x16 vend 0x82 "
            "hw_synd 0/0)",
        ),
        "mlx5_old": _ucx(
            host,
            "ib_mlx5_log.c:139",
            "Error on QP 0x1a2b wqe[1234]: Transport retry count exceeded (synd 0x15 vend 0x81) "
            "opcode SEND",
        ),
        "rc_verbs": _ucx(
            host,
            "rc_verbs_iface.c:124",
            "send completion with error: transport retry counter exceeded [qpn 0x2f1 wrid 0x11 "
            "vendor_err 0x81]",
        ),
        "ucp_ep": _ucx(
            host,
            "ucp_ep.c:1661",
            "ep 0x7f0a1c0b1000: error 'Endpoint timeout' on rc_mlx5/mlx5_0:1 will not be "
            "handled since no error callback is installed",
        ),
        "ud_no_debug": f"[{host}:12345:0:12346]       ud_ep.c:296  Fatal: UD endpoint 0x1b2c3d0 "
        "to <no debug data>: unhandled timeout error\n",
    }


FORMS = sorted(_lines(A))


def _crashes(host: str) -> dict[str, tuple[str, tuple[str, str]]]:
    """Each kind of a process's own end on `host`, and the (category, blame) it is."""
    return {
        "ucx_sigsegv": (
            f"[{host}:54321:0:54321] Caught signal 11 (Segmentation fault: address not mapped "
            "to object at address 0x8)\n",
            ("user_code", "job"),
        ),
        "kernel_segfault": (
            f"Jun  1 10:00:02 {host} kernel: python[54321]: segfault at 8 ip 00007f0000001234 "
            "sp 00007ffd00000000 error 4 in libfoo.so[7f0000000000+1000]\n",
            ("user_code", "job"),
        ),
        "xid79": (
            f"Jun  1 10:00:01 {host} kernel: NVRM: Xid (PCI:0000:18:00): 79, pid=1234, GPU has "
            "fallen off the bus.\n",
            ("gpu_hardware", "node"),
        ),
        "oom_kill": (
            f"Jun  1 10:00:02 {host} kernel: Out of memory: Killed process 54321 (python) "
            "total-vm:812345612kB, anon-rss:503316480kB, file-rss:0kB, shmem-rss:0kB, UID:1000 "
            "pgtables:990000kB oom_score_adj:0\n",
            ("oom_host", "job"),
        ),
        "pdsh_cuda": (
            f"{host}: RuntimeError: CUDA error: an illegal memory access was encountered\n",
            ("user_code", "job"),
        ),
    }


CRASHES = sorted(_crashes(B))


def _verdict(text: str) -> tuple[str | None, str, str | None]:
    got = explain_text(text)
    return got.category, got.blame, got.node


@pytest.mark.parametrize("crash_first", [False, True])
@pytest.mark.parametrize("crash", CRASHES)
@pytest.mark.parametrize("form", FORMS)
def test_a_peerless_ucx_timeout_beside_one_other_hosts_crash_blames_that_host(
    form: str, crash: str, crash_first: bool
) -> None:
    line, (category, blame) = _crashes(B)[crash]
    loss = _lines(A)[form]
    text = line + loss if crash_first else loss + line
    assert _verdict(text) == (category, blame, B), explain_text(text).explanation


@pytest.mark.parametrize("crash", CRASHES)
@pytest.mark.parametrize("form", FORMS)
def test_two_printers_of_a_peerless_timeout_and_one_crashed_host_blame_the_crashed_host(
    form: str, crash: str
) -> None:
    line, (category, blame) = _crashes(B)[crash]
    text = _lines(A)[form] + _lines(C)[form] + line
    assert _verdict(text) == (category, blame, B)


@pytest.mark.parametrize("form", FORMS)
def test_a_peerless_ucx_timeout_beside_two_crashed_hosts_names_neither(form: str) -> None:
    # the kernel's segfault lines, symptoms alone: no crash outranks the timeout by itself
    text = _lines(A)[form] + _crashes(B)["kernel_segfault"][0] + _crashes(C)["kernel_segfault"][0]
    assert _verdict(text)[2] not in (B, C)


@pytest.mark.parametrize("form", ["mlx5_retry", "rc_verbs"])
def test_a_crash_of_the_printer_itself_is_not_read_as_a_lost_peer(form: str) -> None:
    # the host that timed out crashed too: no other host is shown ending, nothing is linked
    text = _lines(A)[form] + _crashes(A)["kernel_segfault"][0]
    assert _verdict(text)[0] == "interconnect"


@pytest.mark.parametrize("form", ["mlx5_retry", "ucp_ep"])
def test_a_sigkill_of_another_host_is_the_teardown_and_links_nothing(form: str) -> None:
    # the launcher's kill after the abort (signals.py) is no crash of the peer's own
    text = _lines(A)[form] + f"srun: error: {B}: task 1: Killed\n"
    assert _verdict(text)[2] != B


def test_a_peerless_timeout_whose_printer_is_not_shown_links_no_crash() -> None:
    # the UCX prefix lost in the paste: the crashed host may be the one that printed the loss
    bare = " ib_mlx5_log.c:177  UCX  ERROR Transport retry count exceeded on mlx5_0:1/IB (synd "
    text = bare + "0x15 vend 0x81 hw_synd 0/0)\n" + _crashes(B)["kernel_segfault"][0]
    assert _verdict(text)[0] == "interconnect"


def test_a_local_ucx_completion_error_points_at_no_peer() -> None:
    # "Local protection error" is the printer's own work request: no peer stopped answering
    text = (
        _ucx(
            A,
            "ib_mlx5_log.c:177",
            "Local protection error on mlx5_0:1/IB (synd 0x4 vend 0x56 hw_synd 0/0)",
        )
        + _crashes(B)["kernel_segfault"][0]
    )
    assert _verdict(text)[::2] != ("user_code", B)


def _ud(printer: str, peer: str) -> str:
    return (
        f"[{printer}:12345:0:12346]       ud_ep.c:296  Fatal: UD endpoint 0x1b2c3d0 to "
        f"{peer}:54321: unhandled timeout error\n"
    )


def test_a_ud_timeout_naming_its_peer_is_read_and_names_the_peer_not_the_printer() -> None:
    assert _verdict(_ud(A, B)) == ("interconnect", "unknown", B)


def test_a_ud_timeout_with_no_debug_data_names_no_host() -> None:
    assert _verdict(_lines(A)["ud_no_debug"]) == ("interconnect", "unknown", None)


@pytest.mark.parametrize("crash", CRASHES)
def test_a_ud_timeout_to_a_named_peer_that_crashed_blames_the_peer(crash: str) -> None:
    line, (category, blame) = _crashes(B)[crash]
    assert _verdict(_ud(A, B) + line) == (category, blame, B)


def test_a_ud_timeout_to_one_peer_is_not_linked_to_another_hosts_crash() -> None:
    # the peer UCX names (gpu-c-03) shows nothing; gpu-b-02's crash is no cause of this loss
    text = _ud(A, C) + _crashes(B)["kernel_segfault"][0]
    assert _verdict(text) == ("interconnect", "unknown", C)
