"""Job log parsing on real public excerpts (training cases of the corpus): launchers and others."""

from __future__ import annotations

from pathlib import Path

from collector.parse.joblog import parse_job_line, parse_job_text
from timeline.models import EventKind

CORPUS = Path(__file__).parent.parent / "fixtures" / "corpus"  # real public excerpts


def _corpus(name: str) -> str:
    return (CORPUS / name).read_text("utf-8")


def test_real_launcher_exit_reports_give_the_exit_code_and_the_signal() -> None:
    # (corpus case, signal, exit code) as each launcher writes it: Open MPI, Hydra, DeepSpeed,
    # torch.multiprocessing, subprocess, an IDE runner (137 = 128 + SIGKILL)
    expected = [
        ("326_mpirun-rank140-signal9-ip-node.txt", 9, None),
        ("329_mpich-bad-termination-killed-signal9.txt", 9, None),
        ("311_deepspeed-return-code-11-prose.txt", 11, -11),
        ("364_mp-spawn-process0-sigsegv-traceback.txt", 11, None),
        ("362_subprocess-died-sigkill-local-rank3-italic.txt", 9, None),
        ("330_ide-exit-code-137-sigkill.txt", 9, 137),
    ]
    for name, sig, code in expected:
        (ev,) = [e for e in parse_job_text(_corpus(name)) if e.kind is EventKind.CHILD_FAILED]
        assert (ev.payload.get("signal"), ev.payload.get("exit_code")) == (sig, code), name


def test_a_launcher_names_the_rank_s_node_unless_the_paste_masks_it() -> None:
    (named,) = parse_job_text(_corpus("326_mpirun-rank140-signal9-ip-node.txt"))
    assert named.node == "10.87.102.19"
    for name in (
        "325_mpirun-rank-signal9-masked-node.txt",
        "327_mpirun-rank7-signal9-hostname-placeholder.txt",
    ):
        (ev,) = [e for e in parse_job_text(_corpus(name)) if e.kind is EventKind.CHILD_FAILED]
        assert ev.node is None, name
    agent = parse_job_text(_corpus("326_mpirun-rank140-signal9-ip-node.txt"), node="gpu-07")
    assert agent[0].node == "gpu-07"  # the agent's own node is what it reports


def test_clean_exits_and_unknown_signal_words_give_no_event() -> None:
    assert parse_job_line("[launch.py:315:sigkill_handler] exits with return code = 0") is None
    assert parse_job_line("process 0 terminated with exit code 0") is None
    assert (
        parse_job_line("DataLoader worker (pid 12) is killed by signal: Unknown signal 99.") is None
    )


def test_real_failure_lines_of_other_emitters_carry_their_text() -> None:
    cases = [
        ("338_ucx-retry-exceeded-master-dci.txt", EventKind.OTHER, "ucx"),
        ("337_orte-lost-remote-daemon-opa-88-nodes.txt", EventKind.OTHER, "mpi"),
        ("321_tensorpipe-rpc-connection-reset.txt", EventKind.OTHER, "c10d"),
        ("357_ray-oom-release-test-node-ip.txt", EventKind.HOST_OOM, "runtime"),
    ]
    for name, kind, emitter in cases:
        events = parse_job_text(_corpus(name))
        assert events, name
        assert {(e.kind, e.payload.get("emitter")) for e in events} == {(kind, emitter)}, name
        assert all(e.payload["text"] in _corpus(name) for e in events)


def test_pals_rank_reports_give_each_ranks_signal_and_node() -> None:
    events = parse_job_text(_corpus("432_pals-rank-died-signal6-then-signal15-hosts.txt"))
    died = [(e.payload["signal"], e.node) for e in events if e.kind is EventKind.CHILD_FAILED]
    assert died == [
        (6, "x4213c4s7b0n0.hsn.cm.aurora.alcf.anl.gov"),
        (15, "x4417c3s5b0n0.hsn.cm.aurora.alcf.anl.gov"),
    ]


def test_cuda_initialisation_shared_memory_and_nccl_cuda_lines_reach_the_rules() -> None:
    cases = [
        ("440_no-cuda-gpus-visible-devices-in-code.txt", "pytorch"),
        ("439_paddle-dataloader-bus-error-dev-shm.txt", "pytorch"),
        ("426_nccl-tests-unhandled-cuda-error-nccl-cuda-mismatch.txt", "nccl"),
    ]
    for name, emitter in cases:
        events = parse_job_text(_corpus(name))
        assert {(e.kind, e.payload.get("emitter")) for e in events} == {
            (EventKind.OTHER, emitter)
        }, name
