"""Which host `explain` names when several hosts speak: the one at fault, never a bystander.

Lines follow the emitters' formats (NCCL WARN prefix, TCPStore, Gloo pair.cc, torch elastic,
syslog); host names are made up.
"""

from __future__ import annotations

from correlator.explain import explain_text


def test_nccl_peer_closed_names_the_remote_peer_not_the_printer() -> None:
    got = explain_text(
        "gpu-a:2311:2390 [0] misc/socket.cc:58 NCCL WARN socketProgress: Connection closed by "
        "remote peer gpu-b<40213>\n"
        "gpu-a:2311:2390 [0] NCCL INFO misc/socket.cc:80 -> 6\n"
    )
    assert (got.category, got.blame, got.node) == ("interconnect", "unknown", "gpu-b")


def test_a_peers_interface_name_is_reported_as_the_host_the_text_calls_it() -> None:
    got = explain_text(
        "gpu-a:1:2 [3] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote "
        "peer gpu-b-ib.cluster.example<5569>\n"
        "gpu-b:7:8 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] via NET/IB/0\n"
    )
    assert got.node == "gpu-b"


def test_tcpstore_loss_names_the_store_host() -> None:
    got = explain_text(
        "[W304 19:44:41.898456436 TCPStore.cpp:125] [c10d] recvValue failed on SocketImpl(fd=73,"
        " addr=[gpu-a]:46764, remote=[gpu-c]:29500): Failed to recv, got 0 bytes. Connection "
        "was likely closed. Did the remote server shutdown or crash?\n"
    )
    assert (got.category, got.node) == ("interconnect", "gpu-c")


def test_gloo_peer_closed_names_the_peer_address() -> None:
    got = explain_text(
        "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by"
        " peer [10.20.0.14]:8594\n"
    )
    assert (got.category, got.node) == ("interconnect", "10.20.0.14")


def test_a_loopback_or_masked_peer_names_nobody() -> None:
    for peer in ("[localhost]:29500", "[127.0.0.1]:58054", "[10.xx.xx.4]:1234"):
        got = explain_text(f"RuntimeError: [pair.cc:598] Connection closed by peer {peer}\n")
        assert got.category == "interconnect" and got.node is None, peer


def test_a_host_that_only_printed_a_timeout_is_not_named() -> None:
    got = explain_text(
        "alice@gpu-a:~$ tail -2 train.log\n"
        "[rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=1, "
        "NumelOut=1, Timeout(ms)=600000) ran for 600060 milliseconds before timing out.\n"
    )
    assert (got.category, got.blame, got.node) == ("nccl_timeout_unknown", "unknown", None)


def test_the_host_whose_own_line_shows_the_fault_beats_the_hosts_that_timed_out() -> None:
    got = explain_text(
        "gpu-b:11:12 [1] NCCL WARN Cuda failure 'out of memory'\n"
        "gpu-a:21:22 [0] NCCL WARN socketProgress: Connection closed by remote peer gpu-b<4>\n"
        "[rank0]:[E ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE) ran for 600060 milliseconds\n"
    )
    assert (got.category, got.blame, got.node) == ("oom_gpu", "job", "gpu-b")


def test_the_first_host_to_fail_is_named_when_the_text_clocks_order_them() -> None:
    got = explain_text(
        "Mar  1 10:02:10 gpu-b kernel: NVRM: Xid (PCI:0000:3b:00): 31, pid=777, name=python, "
        "Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ "
        "0x7f00_00000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ\n"
        "Mar  1 10:00:05 gpu-a kernel: NVRM: Xid (PCI:0000:3b:00): 31, pid=4242, name=python, "
        "Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ "
        "0x7f00_00000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ\n"
    )
    assert (got.category, got.node) == ("user_code", "gpu-a")


def test_independent_node_faults_name_no_single_node() -> None:
    got = explain_text(
        "[2025-07-04T00:54:23.932] update_node: node gpu-a reason set to: Kill task failed\n"
        "[2025-07-04T01:54:23.932] update_node: node gpu-b reason set to: Kill task failed\n"
    )
    assert (got.category, got.node) == ("node", None)


def test_torch_elastic_names_the_root_cause_ranks_host() -> None:
    got = explain_text(
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
        "============================================================\n"
        "train.py FAILED\n"
        "------------------------------------------------------------\n"
        "Failures:\n"
        "  <NO_OTHER_FAILURES>\n"
        "------------------------------------------------------------\n"
        "Root Cause (first observed failure):\n"
        "[0]:\n"
        "  time      : 2025-05-21_15:43:03\n"
        "  host      : gpu-d\n"
        "  rank      : 3 (local_rank: 3)\n"
        "  exitcode  : -9 (pid: 14750)\n"
        "  error_file: <N/A>\n"
        "  traceback : Signal 9 (SIGKILL) received by PID 14750\n"
        "============================================================\n"
    )
    assert (got.category, got.blame, got.node) == ("oom_host", "unknown", "gpu-d")
    assert "OOM killer" in got.explanation


def test_the_peer_most_ranks_report_is_named_and_a_mutual_pair_names_nobody() -> None:
    closed = (
        "{}:1:2 [0] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote "
        "peer {}<4>\n"
    )
    # gpu-c died; gpu-b went down with the abort afterwards
    dead_c = "".join(closed.format(a, b) for a, b in (("gpu-a", "gpu-c"), ("gpu-b", "gpu-c"),
                                                        ("gpu-a", "gpu-b")))  # fmt: skip
    got = explain_text(dead_c)
    assert (got.category, got.node) == ("interconnect", "gpu-c")
    mutual = closed.format("gpu-a", "gpu-b") + closed.format("gpu-b", "gpu-a")
    assert explain_text(mutual).node is None  # a link between the two: no single culprit


def test_pdsh_prefixes_of_one_name_shape_each_writing_once_still_name_their_hosts() -> None:
    # pdsh over three nodes: each writes one line; the node whose own line shows the fault
    text = (
        "gpu-02: [rank5]:[E ProcessGroupNCCL.cpp:616] [Rank 5] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=100, OpType=ALLREDUCE) ran for 600008 milliseconds\n"
        "gpu-03: [rank9]:[E ProcessGroupNCCL.cpp:616] [Rank 9] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=100, OpType=ALLREDUCE) ran for 600008 milliseconds\n"
        "gpu-04: NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.\n"
    )
    got = explain_text(text)
    assert (got.category, got.node) == ("gpu_hardware", "gpu-04")


def test_a_key_value_dump_is_not_read_as_pdsh_hosts() -> None:
    text = (
        "layer1: 0.5\n"
        "layer2: 0.7\n"
        "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.\n"
    )
    assert explain_text(text).node is None


def test_a_syslog_line_behind_a_pdsh_prefix_names_its_host() -> None:
    line = "gpu-04: Jan 01 09:58:00 gpu-04 kernel: NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen"
    got = explain_text(line + " off the bus.")
    assert (got.category, got.node) == ("gpu_hardware", "gpu-04")


_XID79 = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus."
_HOSTS_TIMED_OUT = (
    "gpu-a-01: [2024-01-01 10:00:05,100] [ERROR] [rank0]:[E ProcessGroupNCCL.cpp:607] [Rank 0] "
    "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE) ran for "
    "600060 milliseconds before timing out.\n"
    "gpu-a-02: [2024-01-01 10:00:05,300] [ERROR] [rank8]:[E ProcessGroupNCCL.cpp:607] [Rank 8] "
    "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE) ran for "
    "600060 milliseconds before timing out.\n"
)


def test_one_dmesg_line_behind_a_pdsh_prefix_names_its_host_among_hosts_that_timed_out() -> None:
    # printk's own clock "[%5lu.%06lu]" (kernel/printk/printk.c print_time) and dmesg -T's
    # "[%a %b %e %H:%M:%S %Y]" (util-linux dmesg.c record_ctime) stand in front of the relayed
    # kernel line: one such line names its host, as a line with its own ISO clock does
    for clock in ("[ 1234.567890]", "[    7.000001]", "[Mon Nov 28 10:11:12 2022]"):
        got = explain_text(_HOSTS_TIMED_OUT + f"gpu-b-07: {clock} {_XID79}\n")
        assert (got.category, got.blame, got.node) == ("gpu_hardware", "node", "gpu-b-07"), clock
    assert explain_text(f"gpu-b-07: [Mon Nov  7 10:11:12 2022] {_XID79}").node == "gpu-b-07"


def test_a_bracketed_number_or_word_behind_a_key_is_no_dmesg_clock() -> None:
    # a value list ("[0.512345]", not printk's five-place "[%5lu.%06lu]") or any "[" text
    for first in (
        "layer1: [0.512345]",
        "layer1: [ 0.512345] of the first run",
        "word2: [ a b c d]",
    ):
        assert explain_text(f"{first}\n{_XID79}\n").node is None, first


# torch elastic's failure entry, from torch/distributed/elastic/multiprocessing/errors/__init__.py
# (_FAILURE_FORMAT_TEMPLATE; "time" is ProcessFailure.timestamp_isoformat(), i.e.
# datetime.isoformat(sep="_"), and "host" socket.getfqdn()). Each node's agent prints its own.
_ELASTIC = (
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
    "============================================================\n"
    "train.py FAILED\n"
    "------------------------------------------------------------\n"
    "Failures:\n"
    "  <NO_OTHER_FAILURES>\n"
    "------------------------------------------------------------\n"
    "Root Cause (first observed failure):\n"
    "[0]:\n"
    "  time      : {time}\n"
    "  host      : {host}\n"
    "  rank      : {rank} (local_rank: 0)\n"
    "  exitcode  : 1 (pid: {pid})\n"
    "  error_file: <N/A>\n"
    "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html\n"
    "============================================================\n"
)


def test_elastic_failure_tables_of_two_hosts_name_the_host_whose_failure_time_is_first() -> None:
    text = _ELASTIC.format(time="2024-06-16_20:34:40", host="gpu-01", rank=0, pid=11)
    text += _ELASTIC.format(time="2024-06-16_20:34:01", host="gpu-02", rank=8, pid=22)
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("user_code", "job", "gpu-02")


def test_elastic_failure_times_less_than_a_second_apart_name_no_host() -> None:
    text = _ELASTIC.format(time="2024-06-16_20:34:01", host="gpu-01", rank=0, pid=11)
    text += _ELASTIC.format(time="2024-06-16_20:34:01", host="gpu-02", rank=8, pid=22)
    assert explain_text(text).node is None


def test_deepspeed_lines_behind_pdsh_prefixes_are_ordered_by_their_own_timestamps() -> None:
    # DeepSpeed's launch.py sigkill_handler ("Killing subprocess %d", "%s exits with return code
    # = %d") in its logger's "[%(asctime)s] [%(levelname)s] [file:line:func]" format; the
    # multinode runner's pdsh puts "host: " in front; pdsh's own "ssh exited" line has no clock.
    cmd = "['/usr/bin/python3', '-u', 'train.py', '--local_rank=0']"
    text = (
        "gpu-01: [2024-01-01 10:00:05,100] [INFO] [launch.py:315:sigkill_handler] Killing "
        "subprocess 1234\n"
        f"gpu-01: [2024-01-01 10:00:05,200] [ERROR] [launch.py:321:sigkill_handler] {cmd} exits "
        "with return code = 1\n"
        "gpu-02: [2024-01-01 10:00:01,000] [INFO] [launch.py:315:sigkill_handler] Killing "
        "subprocess 999\n"
        f"gpu-02: [2024-01-01 10:00:01,100] [ERROR] [launch.py:321:sigkill_handler] {cmd} exits "
        "with return code = 1\n"
        "pdsh@gpu-01: gpu-02: ssh exited with exit code 1\n"
    )
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("user_code", "job", "gpu-02")


def test_elastic_failure_tables_behind_pdsh_prefixes_are_read_and_ordered() -> None:
    # pdsh prints each remote line verbatim behind "host: ", indented table rows included
    def pdsh(host: str, text: str) -> str:
        return "".join(f"{host}: {line}\n" for line in text.splitlines())

    text = pdsh("gpu-01", _ELASTIC.format(time="2024-06-16_20:34:40", host="gpu-01", rank=0, pid=1))
    text += pdsh(
        "gpu-02", _ELASTIC.format(time="2024-06-16_20:34:01", host="gpu-02", rank=8, pid=2)
    )
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("user_code", "job", "gpu-02")


def test_an_nccl_last_error_block_behind_a_pdsh_prefix_names_the_peer_it_quotes() -> None:
    text = (
        "gpu-01: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
        "NCCLUtils.hpp:275, remote process exited or there was a network error, NCCL version "
        "2.20.5\n"
        "gpu-01: ncclRemoteError: A call failed possibly due to a network error or a remote "
        "process exiting prematurely.\n"
        "gpu-01: Last error:\n"
        "gpu-01: socketProgress: Connection closed by remote peer gpu-02<39224>\n"
    )
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("interconnect", "unknown", "gpu-02")
