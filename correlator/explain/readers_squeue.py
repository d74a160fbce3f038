"""Reader for `squeue`'s table: a job row's compact state becomes the JOB_STATE event sacct's
row would make, on the row's node when its NODELIST(REASON) cell is one node.

squeue's default format is "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R" (SchedMD/slurm
src/squeue/opts.c), the header "JOBID PARTITION NAME USER ST TIME NODES NODELIST(REASON)"; %t
is the compact state and %R the node list of a job that ran, or "(reason)" of one that waits.
The compact codes are squeue(1)'s JOB STATE CODES (https://slurm.schedmd.com/squeue.html).
"""

from __future__ import annotations

from correlator.explain.readers_gpu import ReadResult
from correlator.explain.readers_sched import job_state_event, single_host

# The codes of states that end a job badly; the rest (PD, R, CG, CD, CF, S, ...) say nothing
# went wrong yet and make no event.
_CODES = {
    "BF": "BOOT_FAIL",
    "CA": "CANCELLED",
    "DL": "DEADLINE",
    "F": "FAILED",
    "NF": "NODE_FAIL",
    "OOM": "OUT_OF_MEMORY",
    "PR": "PREEMPTED",
    "TO": "TIMEOUT",
}


def read_squeue(lines: list[str]) -> ReadResult:
    """`squeue` rows under their header: a JOB_STATE event for each job in a failed state."""
    out = ReadResult()
    cols: dict[str, int] | None = None
    for i, line in enumerate(lines):
        cells = line.split()
        if "JOBID" in cells and "ST" in cells and cells[-1] == "NODELIST(REASON)":
            cols = {c: n for n, c in enumerate(cells)}
            continue
        if cols is None:
            continue
        if len(cells) != len(cols):
            cols = None  # not a row of this table: it ended
            continue
        state = _CODES.get(cells[cols["ST"]])
        if state is None:
            continue
        where = cells[-1]
        node = None if where.startswith("(") else single_host(where)
        fields = {"jobid": cells[cols["JOBID"]]}
        if "USER" in cols:
            fields["user"] = cells[cols["USER"]]
        out.events.append(job_state_event(line, state, fields, node=node, scope="squeue"))
        out.claimed.add(i)
    return out
