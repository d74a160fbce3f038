"""The remote peer a network error names, cleaned to a host that can be blamed (or None)."""

from __future__ import annotations

import ipaddress
import re

# NCCL prints "10.0.0.7<43210>", PyTorch "[gpu-07]:29500" or "(gpu-07, 29500)", Gloo "gpu-07:29500".
_WRAP = re.compile(r"^[\[(]?(?P<h>[^\]<>()\s,]+?)[\])]?(?:<\d+>|:\d+|,\s*\d+\))?[.,;:]*$")
# A cloud's instance metadata service (AWS, GCP, Azure, OpenStack): link-local like a node's
# own RFC 3927 address (which some clusters do run on), but never a node of the job.
_METADATA = ipaddress.ip_address("169.254.169.254")
_ZONE = re.compile(r"[\w.-]*")
_HOSTNAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,253}$")
# Not a host: placeholders in pastes and loopback names.
_PLACEHOLDERS = re.compile(
    r"^(?:localhost(?:\.localdomain)?|ip\d*|host\d*|hostname|node|master|none|null|unknown|"
    r"<?n/?a>?|x+)$",
    re.I,
)


# A name that stands where a host's would and names none (issue #11 corpus policy: "masked
# names, `localhost`, placeholders name no node"):
# - a label of mask characters ("node-XX", "XX-01", "***"), an address with masked octets
#   ("10.x.x.x") or a run of capital X's after the name's own lower-case letters or digits
#   ("gpuXX", "nodeXXX"), as a reporter types them, or a lone capital X as the last label after
#   a lower-case name ("worker-X", "node-X": the reporter's "worker-<n>");
# - a label that says it was masked ("REDACTED", "host-redacted", "anonymized");
# - a docs placeholder that addresses the reader ("your-host", "your.master.ip");
# - names under the TLDs that never resolve to a node (RFC 6761 6.3-6.4: .localhost is
#   loopback, .invalid never exists); an example.com name is left a name, as the corpus's own
#   label reads one ("host-01.example.com" in a training case);
# - a loopback's other names (Debian's /etc/hosts "ip6-localhost ip6-loopback" for ::1);
# - torch's rendezvous variable's own name printed where its value belongs (MASTER_ADDR).
_MASK_LABEL = re.compile(r"^[x*]{2,}$")
_MASK_IPV4 = re.compile(r"^(?:(?:\d{1,3}|[x*]+)\.){3}(?:\d{1,3}|[x*]+)$")
_MASK_TAIL = re.compile(r"[a-z0-9]X{2,}$|^[a-z][a-z0-9]*-X$")
_MASK_WORDS = frozenset(
    {"redacted", "masked", "anonymized", "anonymised", "obfuscated", "censored", "hidden"}
)
_GENERIC = frozenset({"host", "hostname", "node", "nodename", "server", "name", "ip", "addr"})
_RESERVED = re.compile(r"\.(?:invalid|localhost)\.?$", re.I)
_OTHER_NAMES = frozenset({"ip6-localhost", "ip6-loopback", "master_addr"})


def placeholder_name(value: str) -> bool:
    """True when `value`, in a host's place, is a mask or placeholder that names no node."""
    low = value.lower()
    if any(_MASK_LABEL.match(lab) for lab in re.split(r"[.-]", low)):
        return True
    if (_MASK_IPV4.match(low) and "x" in low) or _MASK_TAIL.search(value):
        return True
    words = {w for w in re.split(r"[._-]", low) if w}
    if words & _MASK_WORDS and words <= _MASK_WORDS | _GENERIC:
        return True  # "REDACTED", "host-redacted", "<masked>_hostname"; not "hidden-valley-01"
    return low in _OTHER_NAMES or bool(_RESERVED.search(low)) or low.startswith(("your-", "your."))


def every_hosts(addr: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """True for an address every host has, so it names none: bind-all (0.0.0.0, ::), loopback
    (127.x, ::1) or multicast (RFC 1122 3.2.1.3, RFC 4291, RFC 5771)."""
    return addr.is_loopback or addr.is_unspecified or addr.is_multicast


def _bare_address(value: str) -> str | None:
    """`value` itself when it is an IP address (scope id dropped), else None: a bare IPv6
    address ends in ':<hex>', which _WRAP would take for a port (TCPStore's capture of
    "remote=[2001:db8::17]:29500" is the address without its brackets and port)."""
    head = value.split("%")[0]
    try:
        ipaddress.ip_address(head)
    except ValueError:
        return None
    return head


def peer_host(value: str | None) -> str | None:
    """A host or address fit to be named as the culprit, else None (masked, loopback, ...)."""
    if not value:
        return None
    value = value.strip()
    host = _bare_address(value)
    if host is None:
        m = _WRAP.match(value)
        value = m.group("h") if m else value
        host = value.split("%")[0]  # fe80::1%ib0 -> fe80::1
    # an IPv6 scope's zone ends where a port ("<17943>", "]:29500") begins
    zone = z.group() if "%" in value and (z := _ZONE.match(value.split("%", 1)[1])) else ""
    if host.startswith("::ffff:"):
        host = host[len("::ffff:") :]
    if not host or "xx" in host.lower() or ".." in host or "*" in host:
        return None  # masked by the reporter ("10.xxx.xxx.5", "172....", "***")
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        if (
            not _HOSTNAME.match(host)
            or _PLACEHOLDERS.match(host)
            or placeholder_name(host)
            or host.replace(".", "").isdigit()
        ):
            return None
        return host
    if every_hosts(addr) or addr == _METADATA:
        return None
    if addr.is_link_local and addr.version == 6:
        # fe80::/10 is scoped to one link, but its interface identifier is the port's own
        # (RFC 4291 2.5.6 and appendix A: the modified EUI-64 of its hardware address; IPoIB,
        # RFC 4391 8: of the port GUID), so it names the peer as well as a private IPv4 does;
        # only a hand-set one ("fe80::1", a gateway's) is every link's same address. Its zone
        # (RFC 4007 11: the printer's interface it is reached by) stays, as NCCL prints it.
        if int(addr) & (2**64 - 1) < 2**16:
            return None
        return f"{host}%{zone}" if zone else host
    return host


# A peer that an emitter names by its MPI rank, not its host (MVAPICH2's handle_cqe "Msg from
# %d", "dest rank=%d"): the culprit carries this marker and the rank, which names no host until
# the text shows where that rank ran (correlator/explain/hosts_ranks.py); a space keeps it from
# ever reading as a host name.
RANK_PEER = "mpi rank "


def rank_peer(rank: str | None) -> str | None:
    """The culprit marker for the peer MPI rank `rank` (digits), else None."""
    return f"{RANK_PEER}{int(rank)}" if rank and rank.isdigit() else None
