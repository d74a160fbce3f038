"""Probe set thirty-three (UCX): the peer of an InfiniBand error by its RoCE GID (issue #11).

openucx/ucx @9466d104a317 (correlator/explain/readers_ucx.py cites the lines): the mlx5 error's
second line and rc_verbs' second line dump the peer as "[rqpn 0x%x dlid=%d sl=%d port=%d
src_path_bits=%d dgid=%s flow_label=0x%x sgid_index=%d traffic_class=%d]" (ib_log.c
uct_ib_log_dump_qp_peer_info, ib_device.c uct_ib_ah_attr_str), a transport with an address
vector as " [rqpn 0x%x rmac %02x:... sgix %d dgid %s tc %d]" (ib_mlx5_log.c
uct_ib_mlx5_av_dump), the GID as inet_ntop(AF_INET6) prints it ("::ffff:a.b.c.d" on RoCE v2),
each line under log.c's prefix. The peer's address is tied to its host by its own NCCL init
line ("%s:%d:%d [%d] NCCL INFO NET/Socket : Using [0]%s:%s<0>", NVIDIA/nccl src/debug.cc and
src/transport/net_socket.cc), as in the other probe sets. Of two crashed hosts, the one the GID
names is the lost peer; a GID the text ties to no host, or a LID alone, changes nothing.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text

A, B, C = "gpu-a-01", "gpu-b-02", "gpu-c-03"
ADDR = {B: "10.4.0.17", C: "10.4.0.23"}
_T = "[1717236031.123456]"


def _ucx(where: str, msg: str) -> str:
    return f"{_T} [{A}:12345:0] {where:>17}  UCX  ERROR {msg}\n"


def _qp_peer(gid: str) -> str:
    return (
        f"[rqpn 0x5678 dlid=0 sl=0 port=1 src_path_bits=0 dgid={gid} flow_label=0x0 "
        "sgid_index=3 traffic_class=106]"
    )


def losses(gid: str) -> dict[str, str]:
    """Each UCX error form whose second line names the peer by `gid`."""
    return {
        "mlx5_rc": _ucx(
            "ib_mlx5_log.c:177",
            "Transport retry count exceeded on mlx5_0:1/RoCE (synd 0x15 vend 0x81 hw_synd 0/0)",
        )
        + _ucx(
            "ib_mlx5_log.c:177", "RC QP 0x1a2b wqe[1234]: SEND s-e [inl len 10] " + _qp_peer(gid)
        ),
        "mlx5_dc_av": _ucx(
            "ib_mlx5_log.c:177",
            "Receive-no-ready retry count exceeded on mlx5_2:1/RoCE (synd 0x16 vend 0x82 "
            "hw_synd 0/0)",
        )
        + _ucx(
            "ib_mlx5_log.c:177",
            "DCI QP 0x1a2b wqe[77]: SEND s-e [va 0x7f0000001000 len 64 lkey 0x1234] [rqpn "
            f"0x5678 rmac 0c:42:a1:00:00:01 sgix 3 dgid {gid} tc 106]",
        ),
        "rc_verbs": _ucx(
            "rc_verbs_iface.c:124",
            "send completion with error: transport retry counter exceeded [qpn 0x2f1 wrid 0x11 "
            "vendor_err 0x81]",
        )
        + _ucx("rc_verbs_iface.c:124", _qp_peer(gid)),
    }


FORMS = sorted(losses("::ffff:10.4.0.17"))


def _init(host: str, addr: str) -> str:
    return f"{host}:2311:2311 [0] NCCL INFO NET/Socket : Using [0]eth0:{addr}<0>\n"


def _segfault(host: str) -> str:
    return (
        f"Jun  1 10:00:02 {host} kernel: python[54321]: segfault at 8 ip 00007f0000001234 "
        "sp 00007ffd00000000 error 4 in libfoo.so[7f0000000000+1000]\n"
    )


def _verdict(text: str) -> tuple[str | None, str, str | None]:
    got = explain_text(text)
    return got.category, got.blame, got.node


INITS = _init(B, ADDR[B]) + _init(C, ADDR[C])
CRASHES = _segfault(B) + _segfault(C)


@pytest.mark.parametrize("peer", [B, C])
@pytest.mark.parametrize("form", FORMS)
def test_of_two_crashed_hosts_the_one_the_gid_names_is_the_lost_peer(form: str, peer: str) -> None:
    text = INITS + losses(f"::ffff:{ADDR[peer]}")[form] + CRASHES
    assert _verdict(text) == ("user_code", "job", peer), explain_text(text).explanation


@pytest.mark.parametrize("form", FORMS)
def test_a_gid_the_text_ties_to_no_host_links_no_crash(form: str) -> None:
    text = INITS + losses("::ffff:10.4.0.99")[form] + CRASHES
    assert _verdict(text)[2] not in (B, C)


@pytest.mark.parametrize("form", FORMS)
def test_an_ipv6_gid_names_no_host(form: str) -> None:
    text = INITS + losses("fe80::e42:a1ff:fe00:1")[form] + CRASHES
    assert _verdict(text)[2] not in (B, C)


@pytest.mark.parametrize("form", FORMS)
def test_a_gid_on_another_process_line_is_not_this_errors_peer(form: str) -> None:
    # the peer dump of another UCX process (another pid) is no line of this message
    first, second = losses(f"::ffff:{ADDR[B]}")[form].splitlines(keepends=True)
    text = INITS + first + second.replace(f"[{A}:12345:0]", f"[{A}:12399:0]") + CRASHES
    assert _verdict(text)[2] not in (B, C)


def _from(printer: str, form: str, gid: str) -> str:
    return losses(gid)[form].replace(f"[{A}:12345:0]", f"[{printer}:12345:0]")


@pytest.mark.parametrize("form", FORMS)
def test_two_printers_whose_gids_name_one_peer_point_at_that_peer(form: str) -> None:
    # as NCCL's "Got completion from peer" lines of several hosts naming one peer do
    gid = f"::ffff:{ADDR[B]}"
    text = INITS + _from(A, form, gid) + _from("gpu-d-04", form, gid)
    assert _verdict(text) == ("interconnect", "infra", B), explain_text(text).explanation


@pytest.mark.parametrize("form", FORMS)
def test_two_printers_whose_gids_name_two_peers_name_none(form: str) -> None:
    text = (
        INITS + _from(A, form, f"::ffff:{ADDR[B]}") + _from("gpu-d-04", form, f"::ffff:{ADDR[C]}")
    )
    assert _verdict(text)[2] is None


@pytest.mark.parametrize("form", FORMS)
def test_one_printer_naming_a_gid_peer_stays_the_suspect_as_the_rules_say(form: str) -> None:
    # one host's completion errors do not tell its own link from the peer's (ib_verbs.json)
    assert _verdict(INITS + losses(f"::ffff:{ADDR[B]}")[form])[2] == A
