"""Probe set thirty-three (Ray): an actor's node death names the node that died, not the host
that printed the ActorDiedError (issue #11).

ray-project/ray python/ray/exceptions.py (RayActorError @007329712e97, ActorDiedError on
master): "The actor died unexpectedly before finishing this task." then "\\tclass_name: %s",
"\\tactor_id: %s", "\\tpid: %s", "\\tnamespace: %s", "\\tip: %s" (the actor's node_ip_address)
and the death cause; src/ray/gcs/gcs_server/gcs_actor_manager.cc GenNodeDiedCause: "The actor
died because its node has died. Node Id: %s" then "\\tthe actor's node was terminated
unexpectedly: " / "preempted: " and the NodeDeathInfo's reason_message (older: "The actor is
dead because its node has died. Node Id: %s"). The driver that prints it only saw its actor die:
the culprit is the ip line's node (its host where the text ties the address to one), or no one
when the message names no ip (correlator/explain/readers_ray.py).
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text

A, B = "gpu-a-01", "gpu-b-02"
IP, OTHER_IP = "10.0.0.12", "10.0.0.5"
NODE_ID = "56b97436e67393f15565e024278867700c2bd0ec6ca9e0dac7261fd1"
UNEXPECTED = (
    "\tthe actor's node was terminated unexpectedly: health check failed due to missing too "
    "many heartbeats\n"
)
PREEMPTED = "\tthe actor's node was preempted: the node was preempted by the autoscaler\n"


def actor_died(ip: str | None = IP, cause: str = UNEXPECTED, *, old: bool = False) -> str:
    """A driver's traceback ending in Ray's ActorDiedError for a node death."""
    text = (
        "Traceback (most recent call last):\n"
        '  File "train.py", line 10, in <module>\n'
        "    ray.get(trainer.step.remote())\n"
        "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n"
        "\tclass_name: Trainer\n\tactor_id: bce926b88c54ebb4e8b790bd01000000\n"
        "\tpid: 29686\n\tnamespace: 1f2e3d4c\n"
    )
    if ip:
        text += f"\tip: {ip}\n"
    if old:
        return text + f"The actor is dead because its node has died. Node Id: {NODE_ID}\n"
    return text + f"The actor died because its node has died. Node Id: {NODE_ID}\n" + cause


def _pdsh(host: str, text: str) -> str:
    return "".join(f"{host}: {line}\n" for line in text.splitlines())


def _ray_prefix(text: str) -> str:
    # Ray's driver log prefix of an actor's output (the printer's own ip)
    return "".join(f"(TrainController pid=4242, ip={OTHER_IP}) {ln}\n" for ln in text.splitlines())


def _init(host: str, addr: str) -> str:
    return f"{host}:2311:2311 [0] NCCL INFO NET/Socket : Using [0]eth0:{addr}<0>\n"


def _verdict(text: str) -> tuple[str | None, str, str | None]:
    got = explain_text(text)
    return got.category, got.blame, got.node


PRINTED = {
    "pdsh": _pdsh(A, actor_died()),
    "pdsh_old": _pdsh(A, actor_died(old=True)),
    "ray_prefix": _ray_prefix(actor_died()),
    "prompt": f"user@{A}:~$ python train.py\n" + actor_died(),
}


@pytest.mark.parametrize("form", sorted(PRINTED))
def test_the_ip_line_names_the_dead_node_not_the_printer(form: str) -> None:
    text = PRINTED[form]
    assert _verdict(text)[2] == IP, explain_text(text).explanation


def test_the_dead_nodes_ip_is_the_host_the_text_ties_it_to() -> None:
    assert _verdict(_init(B, IP) + _pdsh(A, actor_died())) == ("node", "node", B)


def test_a_preempted_actor_node_is_named_by_its_ip() -> None:
    assert _verdict(_pdsh(A, actor_died(cause=PREEMPTED))) == ("scheduler", "infra", IP)


def test_no_ip_line_names_no_culprit_rather_than_the_printer() -> None:
    assert _verdict(_pdsh(A, actor_died(ip=None))) == ("node", "node", None)


def test_an_ip_line_parted_from_the_message_names_no_one() -> None:
    head, tail = actor_died().split("The actor died because", 1)
    text = _pdsh(A, head + "some other output\nThe actor died because" + tail)
    assert _verdict(text)[2] is None


def test_a_bare_error_names_its_ip_line_node() -> None:
    assert _verdict(actor_died()) == ("node", "node", IP)


def test_a_bare_error_without_an_ip_line_names_no_one() -> None:
    assert _verdict(actor_died(ip=None))[2] is None


def test_a_bare_old_wording_keeps_its_reading() -> None:
    assert _verdict(actor_died(old=True)) == ("node", "unknown", IP)


def test_a_loopback_ip_line_names_no_node() -> None:
    # a one-machine cluster's node_ip_address names no host of the fleet (rules.hosts.peer_host)
    assert _verdict(_pdsh(A, actor_died(ip="127.0.0.1")))[2] is None


# Ray's own lines that name the dead node by its ip and Node Id (ray.json: gcs_node_manager.cc's
# marked-dead line, the agent's older "Raylet is terminated: ip=%s, id=%s"): the node they name
# is the culprit of an ActorDiedError that names no ip, not the printer
NODE_LINES = {
    "gcs": f"[2024-06-01 10:00:00,000 W 12 12] gcs_node_manager.cc:123: The node with node id: "
    f"{NODE_ID} and address: {IP} and node name: {IP} has been marked dead because the detector "
    "has missed too many heartbeats from it.\n",
    "raylet": f"(raylet) Raylet is terminated: ip={IP}, id={NODE_ID}. Termination is unexpected.\n",
}


@pytest.mark.parametrize("form", sorted(NODE_LINES))
def test_rays_node_line_names_the_dead_node_of_an_error_without_ip(form: str) -> None:
    assert _verdict(_pdsh(A, actor_died(ip=None)) + NODE_LINES[form]) == ("node", "node", IP)
