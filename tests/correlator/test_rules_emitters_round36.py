"""Round thirty-six: one emitter's log prefix and one transcription of a copied log.

- UCCL's logger (uccl-project/uccl include/util/debug.h, UCCLLogger::log) opens each line with
  "[" level, the subsystem for INFO, gethostname(), pid, thread id, function and file:line "] ";
  its RDMA data channel (p2p/rdma/providers/ib_data_channel_impl.cc, poll_once) logs a failed
  completion with ibv_wc_status_str's text. The host of the prefix polled that completion, so
  the IB work-completion error is pinned to it (hosts_fields.py, ib_verbs.json's sources).
- Ray's ActorDiedError (python/ray/exceptions.py) prints the actor's "ip: <address>"; a thread
  that autolinked the address and was copied as markdown holds "ip: [a](http://a/)", a link
  whose text is its own target, which collector/parse/transcribe.py folds back to the address.
Never a corpus case."""

from __future__ import annotations

from collector.parse.transcribe import transcribed
from correlator.explain import explain_text

_CQE = (
    "[WARN gpu-rdma-17 90211 90230 pollOnce rdma/providers/ib_data_channel_impl.cc:203] "
    "pollOnce - channel_id: 2, CQE error, wr_id=77, status=12 (transport retry counter "
    "exceeded), opcode=1, byte_len=0, vendor_err=0x81, qp_num=0x1a2b, wc_flags=0x0\n"
    "[WARN gpu-rdma-17 90211 90230 pollOnce rdma/providers/ib_data_channel_impl.cc:198] "
    "pollOnce - channel_id: 2, WR_FLUSH_ERR, qp_num=0x1a2b\n"
)
_ACTOR = (
    "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n"
    "\tclass_name: RolloutWorker\n"
    "\tpid: 4242\n"
    "\tip: [172.31.4.17](http://172.31.4.17/)\n"
    "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR "
    "Worker exit detail: Worker unexpectedly exits with a connection error code 2. End of file.\n"
)


def test_a_uccl_completion_error_is_pinned_to_the_host_of_its_log_prefix() -> None:
    got = explain_text(_CQE)
    assert (got.category, got.blame, got.node) == ("interconnect", "infra", "gpu-rdma-17")


def test_a_uccl_info_line_with_its_subsystem_names_no_failure() -> None:
    got = explain_text("[INFO P2P gpu-rdma-17 90211 90211 init p2p/engine.cc:88] engine up\n")
    assert got.category is None


def test_an_autolinked_ray_actor_address_names_the_actors_host() -> None:
    got = explain_text(_ACTOR)
    assert (got.category, got.blame, got.node) == ("oom_host", "unknown", "172.31.4.17")


def test_only_a_link_whose_text_is_its_own_target_is_folded() -> None:
    assert transcribed("ip: [10.0.0.7](http://10.0.0.7/)") == "ip: 10.0.0.7"
    assert transcribed("at [x.cc:101](https://x.cc:101/) ok") == "at x.cc:101 ok"
    kept = "see [the docs](http://example.com/) and [10.0.0.7](http://10.0.0.8/)"
    assert transcribed(kept) == kept
