"""The node and job status views of probe set twenty, built as each tool prints them (the format
strings are cited beside each builder); shared by the status-view probe modules."""

from __future__ import annotations

HOSTS = ("gpu-n07", "node0123", "dgx-h100-031", "compute-1-17")
OK = "ok-n99"  # a healthy node beside the failing one
NODE = ("node", "node")


def pbsnodes_a(rows: list[tuple[str, str, str]]) -> str:
    # openpbs src/cmds/pbsnodes.c prt_node: the name, "     %s = %s" attributes, a blank line
    out = []
    for host, state, comment in rows:
        out += [host, f"     Mom = {host}.cluster", "     ntype = PBS", f"     state = {state}"]
        out += ["     pcpus = 64", f"     resources_available.host = {host}"]
        out += [f"     comment = {comment}"] if comment else []
        out += ["     resources_available.ngpus = 8", ""]
    return "\n".join(out)


def pbsnodes_l(rows: list[tuple[str, str, str]]) -> str:
    # pbsnodes -l LISTMRK: printf("%-20s %s %s\n", name, state, comment)
    return "".join(f"{h:<20} {s} {c}\n" for h, s, c in rows)


def pbsnodes_s(rows: list[tuple[str, str, str]]) -> str:
    # pbsnodes -aS prt_node_summary: "%-15.15s %-15.15s %-8.8s %-8.8s %-15.15s %-10.10s %8.8s
    # %7.7s %7.7s %7.7s %s" under its header and dashes
    head = (
        "vnode           state           OS       hardware host            queue        mem     "
        "ncpus   nmics   ngpus  comment\n"
        "--------------- --------------- -------- -------- --------------- ---------- -------- "
        "------- ------- ------- ---------\n"
    )
    return head + "".join(
        f"{h:<15.15} {s:<15.15} {'--':<8} {'--':<8} {h:<15.15} {'--':<10} {'512gb':>8} "
        f"{'64':>7} {'0':>7} {'8':>7} {c or '--'}\n"
        for h, s, c in rows
    )


def bhosts(rows: list[tuple[str, str]]) -> str:
    # OpenLava bhosts.c prtHostsShort: HOST_NAME (18) STATUS (11, 14 with -w) JL/U MAX NJOBS ...
    head = "HOST_NAME          STATUS       JL/U    MAX  NJOBS    RUN  SSUSP  USUSP    RSV\n"
    return head + "".join(
        f"{h:<18} {s:<11}     -     8      0      0      0      0      0\n" for h, s in rows
    )


def bhosts_l(host: str, status: str) -> str:
    # bhosts.c prtHostsLong: "HOST  %s", the STATUS header, the status row, a blank line
    return (
        f"HOST  {host}\n"
        "STATUS           CPUF  JL/U    MAX  NJOBS    RUN  SSUSP  USUSP    RSV DISPATCH_WINDOW\n"
        f"{status:<14} 60.00     -     16      0      0      0      0      0      -\n\n"
        " LOAD THRESHOLD USED FOR SCHEDULING:\n"
    )


def sge_qstat_f(rows: list[tuple[str, str, str]]) -> str:
    # qstat(1) Full Format: queuename qtype resv/used/tot. load_avg arch states, rows between rules
    rule = "-" * 81 + "\n"
    head = "queuename                      qtype resv/used/tot. load_avg arch          states\n"
    body = "".join(
        rule
        + f"{'all.q@' + h:<30} BIP   0/0/8          {load:<8} lx-amd64      {st}".rstrip()
        + "\n"
        for h, load, st in rows
    )
    return head + body


def squeue(rows: list[tuple[str, str]]) -> str:
    # src/squeue/opts.c default "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R"
    head = "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)\n"
    return head + "".join(
        f"{1230 + n:>18} {'gpu':>9} {'train':>8} {'alice':>8} {st:>2} {'5:00':>10} {1:>6} {where}\n"
        for n, (st, where) in enumerate(rows)
    )


def kubectl_nodes(rows: list[tuple[str, str]]) -> str:
    # printers.go printNode: NAME STATUS ROLES AGE VERSION, padded by the tabwriter
    head = "NAME              STATUS                        ROLES    AGE   VERSION\n"
    return head + "".join(f"{h:<17} {s:<29} <none>   30d   v1.28.3\n" for h, s in rows)


def kubectl_pods(rows: list[tuple[str, str]]) -> str:
    # printers.go printPod, -o wide: NAME READY STATUS RESTARTS AGE IP NODE NOMINATED NODE ...
    head = (
        "NAME        READY   STATUS                     RESTARTS   AGE   IP          NODE"
        "              NOMINATED NODE   READINESS GATES\n"
    )
    return head + "".join(
        f"trainer-{n}   0/1     {st:<26} 3          10m   10.0.0.{n + 5:<4} {h:<17} <none>"
        "           <none>\n"
        for n, (h, st) in enumerate(rows)
    )
