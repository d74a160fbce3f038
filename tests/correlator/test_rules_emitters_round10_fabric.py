"""Round ten: HPC fabric and MPI emitters (correlator/rules/emitters/fabric.json): AWS's NCCL OFI
plugin on EFA, libfabric's providers (cxi for HPE Slingshot, efa, verbs;ofi_rxm) and MPICH's
abort and error-stack texts as MPICH, Intel MPI and HPE Cray MPICH print them. Every line is
made up from the emitters' format strings, never a corpus case."""

from __future__ import annotations

import pytest

from collector.parse.joblog import parse_job_text
from correlator.explain import explain_text
from correlator.explain.hosts import host_in_line
from correlator.explain.reasoning import conclude, findings
from correlator.rules.emitters import FAMILIES


def _live(text: str) -> tuple[str | None, str] | None:
    got = conclude(findings(parse_job_text(text, node="n1", suspects=True)))
    return None if got is None else (got.verdict.category, got.verdict.blame)


_CRAY = "MPICH ERROR [Rank 41] [job id 90817.0] [Tue Jan  9 03:04:05 2024] [nid007321] - "
_LF = "libfabric:48213:1704769445::"

# (line, category, blame, node explain names)
FAILURES = [
    # aws-ofi-nccl on EFA: a request completed with an error entry (each release's wording)
    (
        "gpu-st-p4d-17:5521:5601 [3] nccl_net_ofi_rdma_req_test:812 NCCL WARN NET/OFI Request "
        "completed with error. RC: 5. Error: 4 (Input/output error). Completed length: 0",
        "interconnect",
        "infra",
        "gpu-st-p4d-17",
    ),
    (
        "gpu-st-p4d-17:5521:5601 [3] NCCL WARN NET/OFI Request 0x7f3a2c01d0e0 (SEND) completed "
        "with error: err: 5, flags: 2048, prov_errno: 13, strerror: Unresponsive remote (was "
        "previously responsive), len: 0",
        "interconnect",
        "infra",
        "gpu-st-p4d-17",
    ),
    (
        "gpu-st-p4d-17:5521:5601 [3] NCCL WARN NET/OFI Request 0x7f3a2c01d0e0 completed with "
        "error. RC: 5. Error: Input/output error. Completed length: 0, Request: { dev: 0 }",
        "interconnect",
        "infra",
        "gpu-st-p4d-17",
    ),
    (
        "gpu-st-p4d-17:5521:5601 [3] NCCL WARN NET/OFI Unable to retrieve completion queue "
        "entries. RC: -5, ERROR: Input/output error",
        "interconnect",
        "infra",
        "gpu-st-p4d-17",
    ),
    # MPICH / Intel MPI / Cray MPICH: the completion error in the error stack
    (
        "MPIDI_OFI_handle_cq_error(1062)...: OFI poll failed (ofi_events.c:1064:"
        "MPIDI_OFI_handle_cq_error:Input/output error)",
        "interconnect",
        "infra",
        None,
    ),
    (
        "MPIDI_OFI_handle_cq_error(595): OFI poll failed (default nic=cxi2: Input/output error)",
        "interconnect",
        "infra",
        None,
    ),
    (
        "MPIDI_OFI_send_normal(388): OFI call tsendv failed (default nic=hsn0: No route to host)",
        "interconnect",
        "infra",
        None,
    ),
    # the application's own MPI_Abort, bare and behind Cray's prefix (the host it names)
    (
        "Abort(7) on node 5 (rank 5 in comm 0): application called MPI_Abort(MPI_COMM_WORLD, 7) "
        "- process 5",
        "user_code",
        "job",
        None,
    ),
    (
        _CRAY + "Abort(3) (rank 41 in comm 0): application called MPI_Abort(comm=0x84000002, 3) "
        "- process 41",
        "user_code",
        "job",
        "nid007321",
    ),
    # a caller error and MPICH's own allocation failure
    (
        "Abort(403) on node 2 (rank 2 in comm 0): Fatal error in PMPI_Send: Invalid rank, error "
        "stack:",
        "user_code",
        "job",
        None,
    ),
    (
        "MPIR_Localcopy(92): Out of memory (unable to allocate a 'temporary buffer' of size "
        "1073741824)",
        "oom_host",
        "job",
        None,
    ),
    # libfabric providers (the cxi provider names its host after the level)
    (
        _LF + "efa:cq:efa_rdm_txe_handle_error():1084<warn> EFA provider internal txe failure "
        "err: 5, message: Unreachable remote - never received a response (15)",
        "interconnect",
        "infra",
        None,
    ),
    (
        _LF + "verbs;ofi_rxm:cq:rxm_handle_comp_error():1769<warn> fi_cq_readerr: err: "
        "Input/output error (5), prov_err: transport retry counter exceeded (12)",
        "interconnect",
        "infra",
        None,
    ),
]


@pytest.mark.parametrize(("line", "category", "blame", "node"), FAILURES)
def test_a_fabric_or_mpi_failure_line_reads_by_its_emitters_meaning(
    line: str, category: str, blame: str, node: str | None
) -> None:
    got = explain_text(line)
    assert (got.category, got.blame, got.node) == (category, blame, node)
    assert _live(line) == (category, blame)  # the agent's job-log path reads it the same way


def test_efa_dropped_by_a_security_group_blames_the_fabric_setup_and_no_one_host() -> None:
    text = "\n".join(
        [
            "gpu-st-p5-02:731:790 [0] NCCL WARN NET/OFI Request 0x55d1e2f0 (RECV) completed with "
            "error: err: 113, flags: 0, prov_errno: 15, strerror: Unreachable remote - never "
            "received a response, len: 0",
            "",
            "*" * 70,
            "* This error indicates that the security group on either this instance or the peer "
            "instance",
            "* is not setup correctly.  For more information, please see the AWS documentation at",
            "*" * 70,
        ]
    )
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("interconnect", "infra", None)
    assert _live(text) == ("interconnect", "infra")


def test_err_113_without_aws_hint_is_a_completion_error_on_the_host_that_logged_it() -> None:
    line = (
        "nid005012:88:93 [1] NCCL WARN NET/OFI Request 0x7f14cc5b60c0 completed with error. "
        "RC: 113. Error: 2 (UNDELIVERABLE). Completed length: 0"
    )
    got = explain_text(line)
    assert (got.category, got.blame, got.node) == ("interconnect", "infra", "nid005012")


def test_a_slingshot_nic_return_code_is_pinned_to_the_host_cxi_names() -> None:
    line = (
        _LF + "cxi:core:cxip_evtq_progress():309<warn> nid003318: Hardware return code: "
        "C_RC_UNDELIVERABLE (EVENT_ACK)"
    )
    got = explain_text(line)
    assert (got.category, got.blame, got.node) == ("interconnect", "infra", "nid003318")


@pytest.mark.parametrize(
    "prefix",
    ["libfabric:48213:1704769445:cxi:", "libfabric:48213:cxi:"],  # v1.14's and v1.9's log.c
)
def test_older_libfabric_prefixes_read_the_same(prefix: str) -> None:
    line = prefix + "core:cxip_evtq_progress():309<warn> nid003318: Hardware return code: C_RC_"
    got = explain_text(line + "UNDELIVERABLE (EVENT_ACK)")
    assert (got.category, got.blame, got.node) == ("interconnect", "infra", "nid003318")


def test_an_unread_libfabric_warning_is_a_weak_fabric_error_without_node_blame() -> None:
    line = _LF + "cxi:ep_ctrl:cxip_ep_enable():1502<warn> nid003318: cxil_alloc_cmdq failed: -12"
    got = explain_text(line)
    assert (got.category, got.blame) == ("interconnect", "unknown")
    assert got.confidence <= 0.25
    assert _live(line) == ("interconnect", "unknown")


def test_a_refused_libfabric_connection_names_no_culprit() -> None:
    line = (
        _LF + "verbs;ofi_rxm:ep_ctrl:rxm_conn_handle_event():980<warn> fi_eq_readerr: err: "
        "Connection refused (111), prov_err: Unknown error -8 (-8)"
    )
    got = explain_text(line)
    assert (got.category, got.blame, got.node) == ("interconnect", "unknown", None)


@pytest.mark.parametrize(
    "line",
    [
        "Abort(1) on node 3 (rank 3 in comm 0): Fatal error in PMPI_Allreduce: Other MPI error, "
        "error stack:",
        _CRAY + "Abort(672797967) (rank 41 in comm 0): Fatal error in PMPI_Isend: Other MPI error,"
        " error stack:",
        "MPICH ERROR [Rank 9] [job id 31.2] [Fri Nov 22 08:45:32 2024] [nid000412] - Abort(1): "
        "Internal error",
    ],
)
def test_a_fatal_mpi_error_whose_class_says_nothing_blames_no_one(line: str) -> None:
    got = explain_text(line)
    assert got.blame == "unknown"
    assert got.category is None
    assert got.confidence <= 0.25
    live = _live(line)
    assert live is None or live[1] == "unknown"


def test_the_error_stack_says_what_the_bare_class_did_not() -> None:
    text = "\n".join(
        [
            _CRAY + "Abort(403) (rank 41 in comm 0): Fatal error in PMPI_Allreduce: Other MPI "
            "error, error stack:",
            "PMPI_Allreduce(472).............: MPI_Allreduce(sbuf=0x1, rbuf=0x2, count=1, "
            "datatype=MPI_DOUBLE, op=MPI_SUM, comm=MPI_COMM_WORLD) failed",
            "MPIDI_Progress_test(97).........:",
            "MPIDI_OFI_handle_cq_error(1075).: OFI poll failed (ofi_events.c:1077:"
            "MPIDI_OFI_handle_cq_error:Input/output error - UNDELIVERABLE)",
        ]
    )
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("interconnect", "infra", "nid007321")
    assert _live(text) == ("interconnect", "infra")


def test_a_completion_cancelled_during_teardown_is_not_the_root_cause() -> None:
    text = "\n".join(
        [
            "MPIDI_OFI_handle_cq_error(1075): OFI poll failed (ofi_events.c:1077:"
            "MPIDI_OFI_handle_cq_error:Input/output error - CANCELED)",
            "slurmstepd: error: *** STEP 90817.0 ON nid007321 CANCELLED AT 2024-01-09T03:04:05 ***",
        ]
    )
    got = explain_text(text)
    assert got.category == "scheduler"


def test_a_truncated_receive_is_the_programs_sizes() -> None:
    line = (
        "MPIDI_OFI_handle_cq_error(1059): OFI poll failed (ofi_events.c:1061:"
        "MPIDI_OFI_handle_cq_error:Message too long - OK)"
    )
    assert (explain_text(line).category, explain_text(line).blame) == ("user_code", "job")


def test_cray_and_cxi_prefixes_name_the_logging_host_but_mpich_node_numbers_do_not() -> None:
    assert host_in_line(_CRAY + "Abort(1): Internal error") == "nid007321"
    assert (
        host_in_line(
            "MPICH ERROR [Rank 2] [job id 7.0] [Mon Feb 15 14:58:48 2021] [unknown] "
            "[x1000c5s7b0n1] - Abort(1) (rank 2 in comm 0): Fatal error in PMPI_Recv: Other MPI "
            "error, error stack:"
        )
        == "x1000c5s7b0n1"
    )
    assert host_in_line(_LF + "cxi:core:f():1<warn> nid000017: boom") == "nid000017"
    # MPICH's "on node %d" is the world rank, never a host
    assert host_in_line("Abort(1) on node 12 (rank 12 in comm 0): Internal error") is None


HEALTHY = [
    "gpu-st-p4d-17:5521:5521 [0] NCCL INFO NET/OFI Initializing aws-ofi-nccl 1.9.1-aws",
    "gpu-st-p4d-17:5521:5521 [0] NCCL INFO NET/OFI Selected Provider is efa (found 4 nics)",
    "gpu-st-p4d-17:5521:5521 [0] NCCL INFO NET/OFI Using transport protocol RDMA",
    _LF + "cxi:core:cxip_info_init():1200<info> nid003318: CXI device cxi0 found, failover on",
    _LF + "efa:cq:efa_rdm_cq_open():900<debug> error entries: 0",
    _LF + "cxi:core:cxip_env_init():690<warn> nid003318: Adjusted request buffer max cached to 512",
    "MPICH Version:      4.1.2",
    "Intel(R) MPI Library, Version 2021.10  Build 20230619 (id: c2e19c2f3e)",
    "MPICH ERROR handling set to MPI_ERRORS_RETURN for this communicator",
]


@pytest.mark.parametrize("line", HEALTHY)
def test_healthy_fabric_and_mpi_lines_are_not_failures(line: str) -> None:
    assert explain_text(line).category is None
    assert _live(line) is None


def test_every_fabric_rule_cites_sources_and_means() -> None:
    fam = next(f for f in FAMILIES if f.name == "fabric")
    assert len(fam.sources) >= 10
    assert all(s.get("commit") or s.get("url") for s in fam.sources)
    assert len(fam.rules) >= 15
