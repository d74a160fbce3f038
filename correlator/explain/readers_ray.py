"""The node a Ray actor died with, as its ActorDiedError names it (issue #11).

ray-project/ray python/ray/exceptions.py (RayActorError @007329712e97, ActorDiedError on master)
prints an actor's system-level death as "The actor died unexpectedly before finishing this
task." then one line per ActorDiedErrorContext field ("\\tclass_name: %s", "\\tactor_id: %s",
"\\tpid: %s", "\\tname: %s", "\\tnamespace: %s", "\\tip: %s" the actor's node_ip_address) and
the death cause's error_message. For a node's death, src/ray/gcs/gcs_server/gcs_actor_manager.cc
GenNodeDiedCause writes "The actor died because its node has died. Node Id: %s\\n" then the
NodeDeathInfo's "\\tthe actor's node was terminated expectedly: " / "terminated unexpectedly: "
/ "preempted: " / "terminated: " and its reason_message (older releases @47ac75aecf32: "The
actor is dead because its node has died. Node Id: %s"). The node that died is the actor's, the
one the "ip:" line names; the host that printed the error (the driver or caller that saw the
actor die) is not it. So those lines name that ip as the culprit (hosts.own_addresses maps it to
a host the text ties it to), or no one when the message has no ip line (or a loopback one).
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING

from correlator.rules.hosts import peer_host
from timeline.models import Event

if TYPE_CHECKING:
    from correlator.explain.reasoning import Finding

_DIED = re.compile(r"The actor (?:died|is dead) because its node has died\b")
_REASON = re.compile(r"^\s*the actor's node was (?:terminated|preempted)\b")
_FIELD = re.compile(r"^\s+(?:class_name|actor_id|pid|name|namespace|ip):\s")
_IP = re.compile(r"^\s+ip:\s+(?P<ip>\d{1,3}(?:\.\d{1,3}){3})\s*$")
# ActorDiedErrorContext's field lines between the message's head and its cause
_FIELDS = 8
DEAD_NODE_KEY = "ray_dead_node_ip"


def ray_dead_nodes(events: list[Event], lines: list[str]) -> None:
    """Give each event of a Ray actor's node-death lines the ip its ActorDiedError names (empty
    when it names none), in its payload (DEAD_NODE_KEY)."""
    if not any(_DIED.search(ln) for ln in lines):
        return
    dead: dict[str, str] = {}
    for i, line in enumerate(lines):
        if m := _DIED.search(line):
            prefix = line[: m.start()]
            ip = _ip_above(lines, i, prefix)
            nxt = lines[i + 1] if i + 1 < len(lines) else ""
            reason = nxt.startswith(prefix) and _REASON.match(nxt[len(prefix) :])
            for key in (line.strip(), nxt.strip()) if reason else (line.strip(),):
                # actors of one node print the same lines: one naming its ip names it for all
                dead[key] = ip or dead.get(key, "")
    for ev in events:
        raw = (ev.raw or "").strip()
        found = dead[raw] if raw in dead else _by_tail(dead, raw)
        if found is not None:
            ev.payload = {**ev.payload, DEAD_NODE_KEY: found}


def _by_tail(dead: dict[str, str], raw: str) -> str | None:
    # an event read without the line's delivery prefix (pdsh's "host: ")
    if not (_DIED.search(raw) or _REASON.match(raw)):
        return None
    return next((ip for line, ip in dead.items() if line.endswith(raw)), None)


def _ip_above(lines: list[str], i: int, prefix: str) -> str:
    """The ip of the ActorDiedErrorContext field lines right above line i under the same
    prefix, or "" when they name none."""
    for line in reversed(lines[max(0, i - _FIELDS) : i]):
        rest = line[len(prefix) :] if line.startswith(prefix) else None
        if rest is None or not _FIELD.match(rest):
            return ""
        if m := _IP.match(rest):
            return m.group("ip")
    return ""


def dead_node_culprits(found: list[Finding]) -> list[Finding]:
    """Findings of a Ray actor's node death name the node its error names (DEAD_NODE_KEY), or
    none, never the host that printed them."""
    out = []
    for f in found:
        ip = (f.event.payload or {}).get(DEAD_NODE_KEY)
        if ip is not None:
            v = f.verdict
            # a loopback or masked ip (peer_host) names no node
            f = replace(f, verdict=replace(v, culprit=peer_host(str(ip)), at_printer=False))
        out.append(f)
    return out
