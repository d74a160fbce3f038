"""The peer a UCX InfiniBand error names only on its message's next line, by its RoCE GID.

openucx/ucx @9466d104a317 (src/uct/ib/mlx5/ib_mlx5_log.c last changed at 39b34aec6ac7):
- src/ucs/debug/log.c UCS_LOG_FMT "[%lu.%06lu] [%s:%-5d:%s] %17s:%-4u %-4s %-5s %*s%s" prints
  each line of a message under the same prefix (time, host:pid:thread, file:line, "UCX", level);
- src/uct/ib/mlx5/ib_mlx5_log.c uct_ib_mlx5_completion_with_err: "%s on %s:%d/%s (synd ...)"
  then "%s QP 0x%x wqe[%d]: %s %s", the last the peer (uct_ib_log_dump_qp_peer_info) or, for a
  transport with an address vector, the wqe dump's own " [rqpn 0x%x ... sgix %d dgid %s tc %d]"
  (uct_ib_mlx5_av_dump);
- src/uct/ib/rc/verbs/rc_verbs_iface.c: "send completion with error: %s [qpn 0x%x wrid 0x%lx
  vendor_err 0x%x]\\n%s", the second line the same peer dump;
- src/uct/ib/base/ib_log.c uct_ib_log_dump_qp_peer_info: "[rqpn 0x%x " + uct_ib_ah_attr_str
  (src/uct/ib/base/ib_device.c: "dlid=%d sl=%d port=%d src_path_bits=%d", then for a global
  route " dgid=%s flow_label=0x%x sgid_index=%d traffic_class=%d") + "]", the GID as
  uct_ib_gid_str prints it: inet_ntop(AF_INET6), so a RoCE v2 GID of an IPv4 address reads
  "::ffff:a.b.c.d".
That IPv4 is the peer's own address: where the text ties it to a host (hosts.own_addresses),
reasoning_peers names that host as the peer the error lost. A LID or an IPv6 GID names none.
"""

from __future__ import annotations

import re

from timeline.models import Event

_PREFIX = re.compile(r"^\s*(\[\d+\.\d{6}\] \[[^\]\s]+\] +[\w.-]+:\d+ +UCX +[A-Z]+) ")
_GID_V4 = re.compile(
    r"\[rqpn 0x[0-9a-f]+ [^\]]*?\bdgid[= ]::ffff:(?P<ip>\d{1,3}(?:\.\d{1,3}){3})(?![\d.])"
)
# how far the message's next line may be (other processes' lines between them in one file)
_WINDOW = 8
PEER_KEY = "ucx_peer_ipv4"


def ucx_gid_peers(events: list[Event], lines: list[str]) -> None:
    """Give each UCX error event whose message's next line dumps a peer with an IPv4-mapped
    GID that address, in its payload (PEER_KEY)."""
    if not any("dgid" in ln for ln in lines):
        return
    at = {ln.strip(): i for i, ln in enumerate(lines)}
    for ev in events:
        raw = (ev.raw or "").strip()
        m = _PREFIX.match(raw)
        i = at.get(raw)
        if m is None or i is None:
            continue
        if ip := _next_line_gid(lines, i, m.group(1)):
            ev.payload = {**ev.payload, PEER_KEY: ip}


def _next_line_gid(lines: list[str], i: int, prefix: str) -> str | None:
    """The IPv4 of the GID on the next line under the same UCX prefix after line i, if any."""
    for line in lines[i + 1 : i + 1 + _WINDOW]:
        m = _PREFIX.match(line)
        if m is None or m.group(1) != prefix:
            continue
        g = _GID_V4.search(line)
        return g.group("ip") if g else None
    return None
