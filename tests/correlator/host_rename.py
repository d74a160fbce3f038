"""Rename the hosts of a log to another cluster's naming convention, consistently, keeping the
kind of each (a host name stays a host name, an IPv4 address a private IPv4 address of the same
range, an IPv6 address an IPv6 address). Used by test_explain_host_rename_metamorphic.py.

What counts as an occurrence of a host (decided here once, for every case):
- a host name is replaced as a whole token: not inside a longer name ("gpu004" is not renamed
  inside "mygpu004" or "gpu004-2"), with any domain behind it ("gpu004.site.com" is the same
  host's FQDN, "Brian-PC.home" a truth's own), and as the host part of its interface's name
  ("gpu004-ib.site.com") and of Slurm's "slurmstepd-gpu004:" (both are how an emitter names
  that host); an FQDN truth's short name ("node008" of "node008.cm.cluster") is the same host.
  The short name is renamed to the convention's and every domain to the convention's domain,
  so a form stays short or fully qualified as the emitter wrote it, except under a convention
  whose host names are FQDNs (fqdn_hostname), where every form but NCCL's prefix is full;
- a name with a digit in it is matched whatever its case ("GPU03", "gpu03"); a name of letters
  only is matched as spelt ("runtime", "master"), since "Runtime"/"Master" at a sentence's start
  is the word, not the host;
- an IPv4 address is a whole dotted quad (not a longer quad's part, not a version "10.0.0.1.2"),
  never a network ("x.y.z.0", a CIDR "/16") or a broadcast ("x.y.z.255");
- the other hosts are those the readers find in the original text (read_delivered's hosts, each
  event's node, each finding's peer) that have a digit, a dash or a dot in them (a bare word is
  left alone: it may be the word), and every private IPv4 address (RFC 1918, RFC 6598, RFC 3927
  but the metadata service's 169.254.169.254) and every IPv6 address the readers name.
"""

from __future__ import annotations

import ipaddress
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from correlator.explain.readers import read_delivered
from correlator.explain.reasoning import findings
from correlator.rules.hosts import peer_host


@dataclass(frozen=True)
class Convention:
    """One real naming convention: a node's short name for an index, its domain, and the
    octets its address plan puts in front of the host's own."""

    short: Callable[[int], str]
    domain: str
    net: tuple[int, int]
    fqdn: bool = False  # the node's host name is its FQDN (gethostname() returns it whole)


def _gke(n: int) -> str:
    # the instance group's 4-character suffix: lower-case letters and digits
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
    return "gke-prod-gpu-pool-3f1a2b9c-" + "".join(alphabet[(n * k) % 36] for k in (7, 11, 13, 5))


CONVENTIONS: dict[str, Convention] = {
    # AWS ParallelCluster 3 (Slurm): "{queue}-{st|dy}-{compute resource}-{index}", Route 53
    # private zone "{cluster}.pcluster" (docs.aws.amazon.com/parallelcluster/latest/ug/
    # multiple-queue-mode-slurm-user-guide-v3.html); default VPC 10.0.0.0/16
    "parallelcluster": Convention(
        lambda n: f"queue1-st-p5-48xlarge-{n}", "mycluster.pcluster", (0, 17)
    ),
    # EC2 IP-based hostnames "ip-{private IPv4 dashed}", "ec2.internal" in us-east-1
    # (docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-instance-naming.html)
    "ec2": Convention(lambda n: f"ip-10-1-23-{n}", "ec2.internal", (1, 23)),
    # GKE nodes "gke-{cluster}-{pool}-{8 hex}-{4 chars}" (cloud.google.com/kubernetes-engine/docs/
    # concepts/node-pools), zonal DNS "{vm}.{zone}.c.{project}.internal" (cloud.google.com/
    # compute/docs/internal-dns); GKE's default node range 10.128.0.0/20
    "gke": Convention(_gke, "us-central1-a.c.my-project.internal", (128, 0)),
    # HPE Cray EX node ids "nid" and six digits (NERSC Perlmutter's "nid001234", docs.nersc.gov)
    "cray": Convention(lambda n: f"nid{1000 + n:06d}", "hsn.cm.example.org", (100, 4)),
    # Kubeflow training-operator PyTorchJob pods "{job}-{master|worker}-{index}", reached through
    # the headless service of the same name (github.com/kubeflow/training-operator, pkg/
    # controller.v1/pytorch): "{pod}.{namespace}.svc.cluster.local"
    "kubeflow_pod": Convention(
        lambda n: f"trainer-worker-{n}", "default.svc.cluster.local", (244, 3)
    ),
    # AKS nodes "aks-{pool}-{8 digits}-vmss{6 base-36}" (learn.microsoft.com/azure/aks/
    # use-multiple-node-pools; the VMSS computer name is the prefix and the base-36 instance id),
    # Azure-provided DNS "internal.cloudapp.net"; AKS's default node subnet 10.224.0.0/16
    "aks": Convention(
        lambda n: f"aks-gpupool-41392817-vmss{n:06d}", "internal.cloudapp.net", (224, 0)
    ),
    # a node whose host name is set to its FQDN (/etc/hostname "gpu17.cluster.local", as
    # hostnamectl(1) allows): every emitter prints it whole but NCCL, which cuts it (_NCCL_PREFIX)
    "fqdn_hostname": Convention(lambda n: f"dgx{n:03d}", "cluster.local", (20, 2), fqdn=True),
    # a container's default host name: the first 12 hex digits of its id (docs.docker.com/
    # engine/network/ "the container's hostname defaults to the container's ID in Docker")
    "docker_container": Convention(lambda n: f"{n:02d}7f3c9e1d5a", "", (17, 0)),
    # Windows' generated computer name "DESKTOP-" and 7 upper-case letters and digits (the
    # default when unattend's ComputerName is "*": learn.microsoft.com/windows-hardware/customize/
    # desktop/unattend/microsoft-windows-shell-setup-computername), a WSL user's host
    "windows": Convention(lambda n: f"DESKTOP-{n:02d}Q7KJ3", "home", (168, 1)),
    # Alibaba Cloud ECS's default host name "iZ" + the instance id's tail + "Z" (alibabacloud.com/
    # help/en/ecs/user-guide/change-the-hostname-of-an-instance)
    "alibaba_ecs": Convention(lambda n: f"iZbp1d{n:02d}kq8x2m5n7c9e0Z", "", (30, 2)),
}

_PRIVATE4 = tuple(
    ipaddress.ip_network(n)
    for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "169.254.0.0/16")
)
_METADATA = ipaddress.ip_address("169.254.169.254")
# a name's left edge; Slurm built with MULTIPLE_SLURMD logs as "slurmstepd-{node}: error: ..."
# (SchedMD/slurm src/slurmd/slurmstepd/slurmstepd.c: snprintf(argv0, ..., "slurmstepd-%s", ...))
_LEFT = r"(?:(?<![\w.-])|(?<=\bslurmstepd-))"
_IPV4 = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?![\w/]|\.\d)")
_DOMAIN = r"(?P<dom>(?:\.[A-Za-z][\w-]*)*)"
# a host's interface name in front of its domain ("ng30903-ib.narval.calcul.quebec": the name
# NCCL's socket errors give a peer, which explain reads as the host, reasoning._as_named)
_IFACE = r"(?P<iface>-[A-Za-z]{2,5}\d{0,2}(?=\.[A-Za-z]))?"


def new_ipv4(old: str, conv: Convention, n: int) -> str:
    """An address in the same range as `old` (10/8, 172.16/12, ...), in the convention's plan."""
    x, y = conv.net
    first = old.split(".")
    if first[0] == "172":
        return f"172.{16 + x % 16}.{y}.{n}"
    if first[:2] == ["192", "168"]:
        return f"192.168.{y}.{n}"
    if first[0] == "100":
        return f"100.{64 + x % 64}.{y}.{n}"
    if first[:2] == ["169", "254"]:
        return f"169.254.{y + 1}.{n}"
    return f"10.{x}.{y}.{n}"


def _kind(host: str) -> str:
    try:
        return f"ipv{ipaddress.ip_address(host).version}"
    except ValueError:
        return "name"


def _private4(token: str) -> bool:
    try:
        addr = ipaddress.IPv4Address(token)
    except ValueError:
        return False
    last = int(token.rsplit(".", 1)[1])
    return addr != _METADATA and 0 < last < 255 and any(addr in net for net in _PRIVATE4)


def other_hosts(text: str) -> list[str]:
    """The hosts the readers find in `text` (and its private IPv4 addresses), in text order."""
    events, hosts, _, _ = read_delivered(text)
    found = list(hosts) + [ev.node for ev in events if ev.node]
    found += [p for f in findings(events) if (p := peer_host(f.verdict.peer_named))]
    found += [m.group() for m in _IPV4.finditer(text) if _private4(m.group())]
    out: dict[str, str] = {}
    for h in found:
        kind = _kind(h)
        if kind == "ipv6" and ipaddress.ip_address(h).is_link_local:
            continue  # fe80::/10 is every host's own: not a name of one
        if kind == "name" and not re.search(r"[\d.-]", h):
            continue  # a bare word may be the word
        if kind == "ipv4" and not _private4(h):
            continue
        out.setdefault(h.split(".")[0].lower() if kind == "name" else h.lower(), h)
    return sorted(out.values(), key=lambda h: (text.lower().find(h.lower()), h))


def token(host: str) -> str:
    """A regex for a whole-token occurrence of `host` (its short name, then any domain)."""
    kind = _kind(host)
    if kind == "ipv4":
        # not before "/" (a CIDR's prefix length), unless the address is a URL's host
        # ("http://10.0.0.7/": a tracker's autolink of the address, transcribe.py)
        url = r"(?<=//" + re.escape(host) + r")(?=/)"
        return r"(?<![\w.])" + re.escape(host) + r"(?:" + url + r"|(?![\w/]|\.\d))"
    if kind == "ipv6":
        return r"(?<![\w:])" + re.escape(host) + r"(?![\w:])"
    short = re.escape(host.split(".")[0])
    if any(c.isdigit() for c in short):
        short = f"(?i:{short})"
    return _LEFT + short + _IFACE + _DOMAIN + r"(?![\w-])"


@dataclass(frozen=True)
class Renaming:
    """A text with its hosts renamed, and the new spelling of each old form (lower-cased)."""

    text: str
    forms: dict[str, set[str]]

    def of(self, old: str | None) -> str | None:
        """The culprit `old` renamed: its one new spelling, or where the renamed text spells it
        both short and fully qualified, the short one (the corpus's labels name such a host
        by its short name)."""
        spelt = sorted(self.forms.get(old.lower(), ()), key=len) if old else []
        return spelt[0] if spelt else None


def _new_host(old: str, conv: Convention, n: int) -> str:
    kind = _kind(old)
    if kind == "ipv4":
        return new_ipv4(old, conv, n)
    if kind == "ipv6":
        return f"fd12:3456:789a:{conv.net[0]:x}::{n:x}"
    return conv.short(n)


def _free(text: str, conv: Convention, old: str, n: int) -> tuple[str, int]:
    """A new host for `old` at index n or the next one whose name the text does not have."""
    while (new := _new_host(old, conv, n)).lower() in text.lower():
        n += 1
    return new, n


def rename(text: str, file: str, truth: str, conv: Convention) -> Renaming:
    """`text` with the truth's host and every other host it names renamed to `conv`."""
    n = 3 + zlib.crc32(file.encode()) % 40  # the case's own index: the culprit is not always 1
    hosts = [truth] + [h for h in other_hosts(text) if not _same(h, truth)]
    new: dict[str, str] = {}
    for host in hosts:
        new[host], n = _free(text, conv, host, n)
        n += 1
    forms: dict[str, set[str]] = {}
    out = text
    # longest first: a host that is a part of another's FQDN is renamed after it
    for host in sorted(hosts, key=len, reverse=True):
        out = re.sub(
            token(host), partial(_form, host=host, new=new[host], conv=conv, forms=forms), out
        )
    return Renaming(out, forms)


def _same(a: str, b: str) -> bool:
    if _kind(a) != "name" or _kind(b) != "name":
        return a.lower() == b.lower()
    return a.split(".")[0].lower() == b.split(".")[0].lower()


# NCCL's line prefix "host:pid:tid [dev]": NCCL cuts the host name at its first "." (NVIDIA/nccl
# src/debug.cc ncclDebugInit: getHostName(hostname, 1024, '.')), so an FQDN host name is short there
_NCCL_PREFIX = re.compile(r":\d+:\d+ \[\d+\]")


def _form(
    m: re.Match[str], host: str, new: str, conv: Convention, forms: dict[str, set[str]]
) -> str:
    found = m.groupdict()
    full = bool(found.get("dom")) or (conv.fqdn and _kind(host) == "name")
    if _NCCL_PREFIX.match(m.string, m.end()) and not found.get("dom"):
        full = False
    spelt = new + (found.get("iface") or "") + (f".{conv.domain}" if full and conv.domain else "")
    forms.setdefault(m.group().lower(), set()).add(spelt)
    return spelt
