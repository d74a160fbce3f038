"""Probe set thirty-three (NCCL net_ib): several hosts' completion errors naming one peer by
address point at the host the text ties that address to (issue #11).

NVIDIA/nccl src/transport/net_ib.cc WARN "NET/IB : Got completion from peer %s with error %d,
opcode %d, len %d, vendor err %d (%s)" (older), "... with status=%d opcode=%d len=%u vendor err
%d (%s)", and "NET/IB: Got completion from peer %s with status=%s(%d) opcode=%s(%d)
vendor_err=%u %s%s%s%s hca %s" (rules/emitters/nccl.json): the peer is ncclSocketToString's
"address<port>". A host's own init line "%s:%d:%d [%d] NCCL INFO NET/Socket : Using
[0]%s:%s<0>" (src/debug.cc, src/transport/net_socket.cc) ties an address to that host, as the
UCX GID peers of probes33_ucx_gid_peers are tied: where it does, the peer is that host; where it
does not, the address stays the culprit.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text

A, B, C, D = "gpu-a-01", "gpu-b-02", "gpu-c-03", "gpu-d-04"
ADDR = {B: "10.4.0.17", C: "10.4.0.23"}
FORMS = {
    "error": "NET/IB : Got completion from peer {p}<59402> with error 12, opcode 0, len 0, "
    "vendor err 129 (Send)",
    "status": "NET/IB : Got completion from peer {p}<59402> with status=12 opcode=0 len=0 "
    "vendor err 129 (Send)",
    "named_status": "NET/IB: Got completion from peer {p}<59402> with "
    "status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_SEND(0) vendor_err=129 (Send) hca mlx5_0",
}


def _init(host: str, addr: str) -> str:
    return f"{host}:2311:2311 [0] NCCL INFO NET/Socket : Using [0]eth0:{addr}<0>\n"


def _loss(printer: str, form: str, peer: str) -> str:
    msg = FORMS[form].format(p=peer)
    return f"{printer}:2311:2400 [0] transport/net_ib.cc:1234 NCCL WARN {msg}\n"


INITS = _init(B, ADDR[B]) + _init(C, ADDR[C])


def _verdict(text: str) -> tuple[str | None, str, str | None]:
    got = explain_text(text)
    return got.category, got.blame, got.node


@pytest.mark.parametrize("form", sorted(FORMS))
def test_two_printers_naming_one_tied_address_point_at_its_host(form: str) -> None:
    text = INITS + _loss(A, form, ADDR[B]) + _loss(D, form, ADDR[B])
    assert _verdict(text) == ("interconnect", "infra", B), explain_text(text).explanation


@pytest.mark.parametrize("form", sorted(FORMS))
def test_an_address_the_text_ties_to_no_host_stays_the_culprit(form: str) -> None:
    text = INITS + _loss(A, form, "10.4.0.99") + _loss(D, form, "10.4.0.99")
    assert _verdict(text)[2] == "10.4.0.99"


@pytest.mark.parametrize("form", sorted(FORMS))
def test_without_init_lines_the_shared_address_is_the_culprit(form: str) -> None:
    text = _loss(A, form, ADDR[B]) + _loss(D, form, ADDR[B])
    assert _verdict(text)[2] == ADDR[B]


@pytest.mark.parametrize("form", sorted(FORMS))
def test_two_printers_naming_two_tied_addresses_name_neither_host(form: str) -> None:
    text = INITS + _loss(A, form, ADDR[B]) + _loss(D, form, ADDR[C])
    assert _verdict(text)[2] not in (B, C, ADDR[B], ADDR[C])


@pytest.mark.parametrize("form", sorted(FORMS))
def test_one_printer_naming_a_tied_address_stays_the_suspect(form: str) -> None:
    # one host's completion errors do not tell its own link from the peer's (ib_verbs.json)
    assert _verdict(INITS + _loss(A, form, ADDR[B]))[2] == A
