"""Log aggregators' wrappers (correlator/explain/wrappers_aggregators.py, and the shipper
records of collector/parse/delivery.py), each in its tool's exact format with made-up values:
the wrapper is taken off, the host is taken where the format names it, and a line that only
looks like one is left alone."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest

from correlator.explain import explain_text
from correlator.explain.wrappers import undelivered
from tests.correlator.wrapper_lines import ECC, ILLEGAL, TIMEOUT, XID

_FB_TAG = "kube.var.log.containers.trainer-0_ml_pytorch-5d1e.log"


def _hit(source: dict[str, object]) -> str:
    return json.dumps({"_index": "filebeat-8.13.0", "_id": "x1", "_score": 1.0, "_source": source})


@pytest.mark.parametrize(
    "wrapped",
    [
        f'2025-01-12T08:14:03Z {{container="pytorch", pod="trainer-0"}} {ILLEGAL}',  # logcli
        f"2025-01-12T09:14:03+01:00 {{}}   {ILLEGAL}",  # logcli, one stream, padded
        json.dumps({"labels": {"job": "train"}, "line": ILLEGAL, "timestamp": "2025-01-12T08:14Z"}),
        f"2025-01-12T08:14:03.482000+00:00 train-job/default/4f1c0a9e {ILLEGAL}",  # aws detailed
        f"2025-01-12T08:14:03+00:00 train-job/default/4f1c0a9e {ILLEGAL}",  # aws --format json
        f"2025-01-12T08:14:03 {ILLEGAL}",  # aws logs tail --format short
        f'[0] {_FB_TAG}: [1736669643.482913004, {{"stream"=>"stderr", "log"=>"{ILLEGAL}"}}]',
        f'[3] {_FB_TAG}: [[1736669643.482913004, {{}}], {{"log"=>"{ILLEGAL}", "stream"=>"err"}}]',
        json.dumps({"date": 1736669643.482913, "log": ILLEGAL}),  # fluent-bit json_lines
        json.dumps({"message": ILLEGAL, "source_type": "file", "timestamp": "2025-01-12T08:14Z"}),
        _hit({"@timestamp": "2025-01-12T08:14:03.482Z", "message": ILLEGAL}),  # a search hit
        json.dumps({"@timestamp": "2025-01-12T08:14:03.482Z", "message": ILLEGAL}),  # _source
    ],
)
def test_each_aggregator_wrapper_is_taken_off_and_the_line_quoted_as_delivered(
    wrapped: str,
) -> None:
    assert undelivered(wrapped).lines[0] == ILLEGAL
    got = explain_text(wrapped)
    assert (got.category, got.blame) == ("user_code", "job")
    assert got.evidence == [wrapped]


@pytest.mark.parametrize(
    ("waiter", "culprit", "host"),
    [
        (
            '2025-01-12T08:14:03Z {host="gpu-a07", job="train"} ',
            '2025-01-12T08:14:04Z {host="gpu-a09", job="train"} ',
            "gpu-a09",
        ),
        (
            '2025-01-12T08:14:03Z {namespace="ml", node_name="gpu-a07"} ',
            '2025-01-12T08:14:04Z {namespace="ml", node_name="gpu-a09"} ',
            "gpu-a09",
        ),
        (
            '2025-01-12T08:14:03Z {node="gpu-a07"} ',
            '2025-01-12T08:14:04Z {node="gpu-a09"} ',
            "gpu-a09",
        ),
        (
            "2025-01-12T08:14:03.482000+00:00 i-0abc1234def567890 ",
            "2025-01-12T08:14:04.000000+00:00 i-0fed1234abc567890 ",
            "i-0fed1234abc567890",
        ),
        (
            "2025-01-12T08:14:03.482000+00:00 ip-10-0-1-7.ec2.internal ",
            "2025-01-12T08:14:04.000000+00:00 ip-10-0-1-9.ec2.internal ",
            "ip-10-0-1-9.ec2.internal",
        ),
    ],
)
def test_a_prefix_that_names_the_host_makes_the_faulting_host_the_culprit(
    waiter: str, culprit: str, host: str
) -> None:
    # the host that printed only a timeout is never the culprit (issue #11)
    got = explain_text(f"{waiter}{TIMEOUT}\n{culprit}{ECC}")
    assert (got.category, got.blame, got.node) == ("gpu_hardware", "node", host)


def _fluent_bit(line: str, node: str) -> str:
    record = f'{{"log"=>"{line}", "kubernetes"=>{{"pod_name"=>"trainer-0", "host"=>"{node}"}}}}'
    return f"[0] {_FB_TAG}: [[1736669643.482913004, {{}}], {record}]"


@pytest.mark.parametrize(
    "record",
    [
        lambda line, node: json.dumps({"labels": {"hostname": node}, "line": line, "ts": "x"}),
        _fluent_bit,
        lambda line, node: _hit({"message": line, "host": {"name": node}}),
        lambda line, node: _hit({"message": line, "kubernetes": {"node": {"name": node}}}),
        lambda line, node: json.dumps({"message": line, "kubernetes.node.name": node}),
        lambda line, node: json.dumps({"message": line, "kubernetes": {"pod_node_name": node}}),
    ],
    ids=["logcli_jsonl", "fluent_bit", "es_host", "es_kube_node", "es_dotted", "vector"],
)
def test_a_record_that_names_its_node_makes_the_faulting_node_the_culprit(
    record: Callable[[str, str], str],
) -> None:
    text = f"{record(TIMEOUT, 'gpu-a07')}\n{record(ECC, 'gpu-a09')}"
    assert undelivered(text).hosts == ["gpu-a07", "gpu-a09"]
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("gpu_hardware", "node", "gpu-a09")


@pytest.mark.parametrize(
    "prefix",
    [
        '2025-01-12T08:14:04Z {instance="10.0.1.9:9100", pod="trainer-1"} ',  # the pod's, no node
        "2025-01-12T08:14:04.000000+00:00 train-job/default/4f1c0a9e ",  # a Batch job's stream
        "2025-01-12T08:14:04.000000+00:00 2025/01/12/[$LATEST]4f1c0a9e5d ",  # a Lambda's
        # host labels that name two different nodes: which one the line is about is not known
        '2025-01-12T08:14:04Z {host="gpu-a07", node_name="gpu-a09"} ',
    ],
)
def test_a_prefix_that_names_no_host_gives_none(prefix: str) -> None:
    text = f"{prefix}{TIMEOUT}\n{prefix}{ECC}"
    assert undelivered(text).hosts == [None, None]
    assert explain_text(text).node is None


@pytest.mark.parametrize(
    "text",
    [
        # a line that only mentions a label set, a selector or a record
        f'ALERT GPUDown up{{host="gpu-a09"}} == 0\n{ILLEGAL}',
        f'query {{host="gpu-a09"}} returned 3 lines\nquery {{host="gpu-a09"}} ok\n{ILLEGAL}',
        f'{{host="gpu-a09"}} 2025-01-12T08:14:03Z {ILLEGAL}\n{{host="gpu-a09"}} done',
        f'[1] worker: [1736669643.482913004, {{"log"=>"x"}}] more\n{ILLEGAL}\n{TIMEOUT}',
        json.dumps({"message": ILLEGAL, "level": "error"}),  # an app's own JSON, no shipper key
    ],
)
def test_a_line_that_only_resembles_an_aggregator_is_left_alone(text: str) -> None:
    got = undelivered(text)
    assert got.lines == text.splitlines() and set(got.hosts) == {None}


def test_a_syslog_paste_with_iso_stamps_keeps_its_host() -> None:
    # journalctl -o short-iso-precise has a detailed `aws logs tail` line's shape
    lines = [
        f"2025-01-12T08:14:03.482913+00:00 gpu-node-17 kernel: {XID}",
        "2025-01-12T08:14:03.500000+00:00 gpu-node-17 systemd[1]: Started Session 4.",
        "2025-01-12T08:14:04.000001+00:00 gpu-node-17 kernel: nvidia-nvlink: Unregistered",
    ]
    got = explain_text("\n".join(lines))
    assert (got.category, got.blame, got.node) == ("gpu_hardware", "node", "gpu-node-17")


def test_an_aggregator_line_holding_a_runtime_record_loses_both() -> None:
    cri = f"2025-01-12T08:14:03.482913004Z stderr F {ILLEGAL}"
    assert undelivered(f'2025-01-12T08:14:03Z {{pod="trainer-0"}} {cri}').lines == [ILLEGAL]


def test_fluent_bits_partial_cri_records_join_into_one_line() -> None:
    parts = [("P", "RuntimeError: CUDA error: an illegal "), ("F", "memory access was encountered")]
    text = "\n".join(
        json.dumps({"time": "2025-01-12T08:14:03Z", "stream": "stderr", "logtag": t, "log": x})
        for t, x in parts
    )
    assert undelivered(text).lines == [ILLEGAL]


@pytest.mark.parametrize(
    "hostile",
    [
        '2025-01-12T08:14:03Z {a="' + "\\" * 200_000,
        "2025-01-12T08:14:03Z {" + 'a="b", ' * 50_000 + "}",
        f"[0] {_FB_TAG}: [1736669643.482913004, " + '{"log"=>"' + '", "' * 100_000 + "}]",
        "2025-01-12T08:14:03.482000+00:00 " + "a" * 200_000,
    ],
)
def test_hostile_aggregator_lines_are_read_in_linear_time(hostile: str) -> None:
    # the wrappers only: explain's own readers of one long word are another matter
    start = time.monotonic()
    undelivered("\n".join([hostile] * 3))
    assert time.monotonic() - start < 5.0


def test_a_logcli_jsonl_record_whose_host_labels_disagree_names_no_host() -> None:
    record = {"labels": {"host": "gpu-a07", "node": "gpu-a09"}, "line": ECC, "ts": "x"}
    assert undelivered(json.dumps(record)).hosts == [None]
    assert explain_text(json.dumps(record)).node is None
