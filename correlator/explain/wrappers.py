"""How a log was delivered, taken off before it is read: the wrapper each delivering tool puts
around the lines it passes on, in the format the tool's own source or reference gives, and the
host the wrapper names (kept as the line's host, as pdsh's "host: " prefix is).

Sources (repository, path and commit, or documentation URL):
- kubelet `kubectl logs --timestamps`: kubernetes/kubernetes pkg/kubelet/kuberuntime/logs/logs.go
  @81b7503c1424d3c463cc212f2dfef3aad6822db6 (logWriter.write: RFC3339NanoFixed + " "); CRI
  log files, same file (parseCRILog: "<RFC3339Nano> <stdout|stderr> <P|F>[:tags] <log>", a
  partial "P" line continued by the next);
- `kubectl logs --prefix`: https://kubernetes.io/docs/reference/kubectl/generated/kubectl_logs/
  ("Prefix each log line with the log source (pod name and container name)"); the bracketed
  "[pod/NAME/CONTAINER] " shape was not found in a stored kubectl source here (unverified);
- docker json-file: moby/moby daemon/logger/jsonfilelog/jsonlog/jsonlogbytes.go
  @46cf8cecc85763b9bef9aa20e9b1f8eba2e88822 ({"log":...,"stream":...,"attrs":...,"time":...},
  a line over 16 KiB split into "log" chunks without their trailing "\\n");
- journalctl -o json: https://www.freedesktop.org/software/systemd/man/latest/journalctl.html and
  systemd.journal-fields(7) (one object a line; MESSAGE, a byte array when not UTF-8; _HOSTNAME);
  -o short-iso / short-precise keep syslog's "time host ident[pid]: " (hosts.py reads the host);
- srun --label: SchedMD/slurm src/api/step_io.c @3609dd3c1716ef507e3ad6cbeb282c0fe0ac5077
  (_build_label: "%*d: " at the width of the largest task id, "P%u %*d: " for a het job);
  a `--output=...%t` pattern names a file per task and adds nothing to the lines;
- mpirun --tag-output / --timestamp-output: open-mpi/ompi orte/mca/iof/base/iof_base_output.c
  @34d089dbaa1646a1fff05025f4dfcffff1422b43 ("[%s,%s]<%s>:", ctime() in front with
  --timestamp-output, "%s<%s>:" alone); PMIx's "[%s,%s]<%s>: " and tag-detailed
  "[%s,%s][%s:%s]<%s>: " (job, rank, host, pid): openpmix/openpmix src/common/pmix_iof.c
  @70d5a53ae3528fae8c4835c270953b612962964d;
- MPICH Hydra -prepend-rank: pmodels/mpich src/pm/hydra/ui/mpich/utils.c
  @c1733c1d07c8ecf1be474f9ce0adc27e4ac339bf (prepend_rank_fn: pattern "[%r] ");
- torchrun --tee / --log-dir: pytorch/pytorch torch/distributed/elastic/multiprocessing/tail_log.py
  @ca70f656c9e1f6fc9cea11cd78c96982690081f8 (header "[{name}{local_rank}]:", name the role,
  "default" unless --role) and agent/server/local_elastic_agent.py
  @0bd26e0f0f513792b786c7b36fb29dcd7f80a353 (TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE, e.g.
  "[${rank}]:" or "[rank${rank}]:");
- Ray: ray-project/ray python/ray/_private/worker.py @daf610416eb7e506252a115f27edb64137a1415e
  (print_worker_logs: "({actor or task name} pid={pid}, ip={ip}) " coloured by colorama, the
  ", ip=" left out for the driver's own node; "(raylet, ip=...)");
- Determined task logs (`det task logs`, the web UI): determined-ai/determined
  master/pkg/model/task.go @c1e9c6d7b821ef246d612bb9922f7fb1b58dcf2e (TaskLog.Message: parts
  "[<RFC3339 micro>]", the container id's first 8 characters or 8 spaces, "[rank=N]" when the
  rank is known, "||", "LEVEL:" when known (master/pkg/tasklog/log_levels.go), the log, joined
  by " ") and master/internal/sproto/task_actor.go, same commit (ContainerLog.String:
  "[%s] %s || %s", RFC3339Nano); the container id is no host;
- `docker service logs`: docker/cli cli/command/service/logs.go (taskFormatter.format
  "%s@%s%s", the task and its node padded, logWriter.Write "%s    |"); the node is the line's;
- log aggregators, read back (correlator/explain/wrappers_aggregators.py, taken off before a
  runtime record inside them): Loki's `logcli query`, grafana/loki pkg/logcli/output/default.go
  @5a511b9d3e325ce5f3e915727905e63258a892bc (FormatAndPrintln: "%s %s %s", time.RFC3339, the
  padded labels, strings.TrimSpace(line)), pkg/loghttp/labels.go
  @0d139c72f1f1b6df96a937e0af3acd7c91604f3f (LabelSet.String: sorted, ", ", strconv.Quote),
  pkg/logcli/query/query.go @15b731c8bc7faf2541d9aa42f6f54a6ea125a225 (printStream: the labels
  common to all streams left out), --output=jsonl pkg/logcli/output/jsonl.go
  @fbb1d74fd222ef74b67dbd7da04be50584b57cf7 ({"labels", "line", "timestamp"}), --no-labels is
  "time line" (the --timestamps shape below); the host from a "host", "hostname", "node_name"
  or "node" label (collector/parse/delivery.py LOKI_HOST_LABELS says whose), never "instance";
  `aws logs tail`, aws/aws-cli awscli/customizations/logs/tail.py
  @00d4d6e8d9acf07b08a8a37a299d5c7c734458fc (Detailed/ShortLogEventsFormatter, the JSON one's
  time isoformat()), the stream a host only when an EC2 instance id (the CloudWatch agent's
  default stream name, {instance_id}) or an EC2 host name "ip-a-b-c-d[.domain]"; a text whose
  lines are mostly "TIME HOST IDENT: " stays journalctl's; `fluent-bit -o stdout`,
  fluent/fluent-bit plugins/out_stdout/stdout.c @7161b692cb848ef6c72b5310a666d37e0fcd87e7
  ("[%zd] %s: [", "%u.%09lu, ", msgpack_object_print of the record; json_lines with a "date"
  key); Vector's console sink with a json codec and Elasticsearch/OpenSearch hits or _source
  lines (ECS "message", "host.name", Filebeat's "kubernetes.node.name") are shipper records
  (collector/parse/delivery.py);
- ANSI escapes: ECMA-48 CSI "ESC [ params intermediates final", OSC "ESC ] ... BEL|ESC \\".
DeepSpeed's multinode runners deliver through pdsh ("host: ", hosts.prefix_hosts) or an MPI
launcher (above); its launcher source adds no host prefix of its own.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from collector.parse.delivery import (
    CRI,
    CTIME,
    DETERMINED,
    KUBE_PREFIX,
    MAX_JSON,
    MPI_TAG,
    RAY,
    RFC3339,
    SWARM,
    json_record,
)
from collector.parse.transcribe import transcribed
from correlator.explain.hosts import clean_host
from correlator.explain.wrappers_aggregators import SYSLOG_REST, unaggregated

# ECMA-48 control sequences, each bounded (a hostile line cannot make them backtrack).
_ANSI = re.compile(
    r"\x1b\[[0-?]{0,32}[ -/]{0,8}[@-~]|\x1b\][^\x07\x1b]{0,512}(?:\x07|\x1b\\)|\x1b[@-Z\\-_]"
)
_KUBE_TS = re.compile(rf"^{RFC3339}(?: |$)")
# more than microseconds: the kubelet's RFC3339NanoFixed (9 digits) or docker's RFC3339Nano;
# journalctl's -o short-iso-precise stops at 6, so such a stamp never opens a syslog line
_NANO_TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{7,9}")
# A paste's own markup around the whole log: a markdown block quote ("> " opening each line,
# nested "> > ") and the indentation of a code block (CommonMark: "> " after up to 3 spaces)
_QUOTE_MARK = re.compile(r"^ {0,3}(?:>[ \t]?){1,8}")
_INDENT = re.compile(r"^[ \t]*")
_SRUN = re.compile(r"^(?:P\d{1,4} )? {0,6}(?P<task>\d{1,7}): ")
# Hydra's -prepend-rank "[N] "; pssh -i's status line opens with its own "[N] HH:MM:SS [SUCCESS]"
# (krig/parallel-ssh psshlib/task.py report), the header of its host's block (hosts_blocks.py)
_HYDRA = re.compile(r"^\[\d{1,7}\] (?!\d\d:\d\d:\d\d \[(?:SUCCESS|FAILURE)\] )")
# a role name ("default", "trainer", "rank") in front of the rank is only torchrun's; a bare
# "[1]:" is also how a ChildFailedError table numbers its failures
_TORCHRUN = re.compile(r"^\[[A-Za-z_][\w.-]{0,31}?(?P<rank>\d{1,7})\]: ?")
_TORCHRUN_BARE = re.compile(r"^\[(?P<rank>\d{1,7})\]: ?")
# what a launcher's label says of the line, under the names the agent's job-log parser gives it
# (collector/parse/joblog.py _strip_prefix), so explain's events carry the same payload
_LABEL_KEYS = {"rank": "log_rank", "task": "srun_task"}


@dataclass
class Delivered:
    """The lines as their emitters wrote them, and what the delivery said around each."""

    lines: list[str]
    hosts: list[str | None]
    verbatim: dict[str, str] = field(default_factory=dict)  # line -> delivered line(s)
    # line -> what a launcher's label said of it: {"log_rank": 3} (torchrun), {"srun_task": 12}
    labels: dict[str, dict[str, int]] = field(default_factory=dict)
    # each line's stream as its delivery named it (the host, or the launcher's label of the rank
    # or task: "[1,3]<stderr>:", "[default2]:", "3:"), None where no wrapper named one; the
    # streams a launcher merges line by line in arrival order (srun's step_io, Open MPI's iof)
    streams: list[str | None] = field(default_factory=list)

    def quoted(self, raw: str) -> str:
        """`raw` (one or more read lines) as the delivered text has it, escapes left out."""
        return "\n".join(_ANSI.sub("", self.verbatim.get(ln, ln)) for ln in raw.split("\n"))

    def quote_unprefixed(self, bare: list[str]) -> None:
        """Quote each of `bare` (the read lines, a pdsh-style prefix taken off some) as the
        delivered text has that part of its line: a line read without its "host: " prefix is
        not a whole delivered line, so a paste's no-break spaces or escapes would otherwise
        be quoted as read rather than as pasted."""
        for line, rest in zip(self.lines, bare, strict=True):
            pasted = self.verbatim.get(line)
            if pasted is None or rest == line or rest in self.verbatim:
                continue
            head = line[: len(line) - len(rest)]
            # the shortest piece of the pasted line that reads as the prefix
            cut = next((k for k in range(len(pasted) + 1) if transcribed(pasted[:k]) == head), None)
            if cut is not None:
                self.verbatim[rest] = pasted[cut:]


def _json_line(line: str) -> tuple[str, str | None, bool] | None:
    """(message, host, complete) of a docker json-file or journalctl -o json line."""
    rec = json_record(line)
    if rec is None or rec[1] is None:
        return rec
    return rec[0], clean_host(rec[1]), rec[2]


def _strip_ts(line: str) -> str | None:
    """The line without kubectl's --timestamps stamp, unless that stamp opens a syslog line."""
    m = _KUBE_TS.match(line)
    if not m:
        return None
    if SYSLOG_REST.match(line[m.end() :]) and not _NANO_TS.match(line):
        return None
    return line[m.end() :]


def _single_spaced(lines: list[str]) -> list[str]:
    """The lines without the blank line a double-spaced paste (text copied from a rendered
    page) puts after each, when no two of its lines are next to each other."""
    filled = [i for i, ln in enumerate(lines) if ln.strip()]
    if len(filled) < 3 or any(b - a == 1 for a, b in itertools.pairwise(filled)):
        return lines
    return [lines[i] for i in filled]


def _unpasted(lines: list[str]) -> list[str]:
    """The lines without the markup of the paste they came in (a block quote, a code block's
    indentation), when it opens most non-blank lines; their relative indentation kept."""
    filled = [ln for ln in lines if ln.strip()]
    if filled and sum(1 for ln in filled if _QUOTE_MARK.match(ln)) * 2 > len(filled):
        lines = [_QUOTE_MARK.sub("", ln, count=1) for ln in lines]
        filled = [ln for ln in lines if ln.strip()]
    indents = [m.group() for ln in filled if (m := _INDENT.match(ln))]
    if not indents or not (lo := min(indents)):
        return lines
    hi = max(indents)  # the common prefix of the least and the greatest is everyone's
    size = next((i for i, (a, b) in enumerate(zip(lo, hi, strict=False)) if a != b), len(lo))
    common = lo[:size]
    if not common:
        return lines
    return [ln[len(common) :] if ln.startswith(common) else ln.lstrip(" \t") for ln in lines]


# a stripped line, the host its wrapper named, what the wrapper's label said of it, and the
# stream it named (the prefix without its clock, which every line of a stream has its own of)
_Stripped = tuple[str, str | None, dict[str, int], str | None]
# the clocks in a wrapper's prefix: RFC 3339 (Determined, kubectl) and ctime (Open MPI)
_PREFIX_CLOCK = re.compile(rf"\[?{RFC3339}\]?|{CTIME}")


def _prefix(pattern: re.Pattern[str]) -> Callable[[str], _Stripped | None]:
    def strip(line: str) -> _Stripped | None:
        m = pattern.match(line)
        if not m:
            return None
        found = m.groupdict()
        host = found.get("h")
        labels = {_LABEL_KEYS[k]: int(v) for k, v in found.items() if k in _LABEL_KEYS and v}
        stream = _PREFIX_CLOCK.sub("", m.group()).strip() or None
        return line[m.end() :], clean_host(host) if host else None, labels, stream

    return strip


def _ts(line: str) -> _Stripped | None:
    rest = _strip_ts(line)
    return None if rest is None else (rest, None, {}, None)


# Line prefixes in the order a delivery nests them (Determined's task-log prefix around all the
# container printed, kubectl --prefix, then its time stamp, then a launcher's label inside the
# container's own output); each with whether it is taken only
# when it opens most lines (a shape that a log line may have of its own: "12: ", "[3] ", a
# leading time stamp) or wherever it is (a shape only the launcher writes).
_PREFIXES: tuple[tuple[Callable[[str], _Stripped | None], bool], ...] = (
    (_prefix(DETERMINED), False),
    (_prefix(KUBE_PREFIX), False),
    (_ts, True),
    (_prefix(SWARM), False),
    (_prefix(MPI_TAG), False),
    (_prefix(_TORCHRUN), False),
    (_prefix(_TORCHRUN_BARE), True),
    (_prefix(_SRUN), True),
    (_prefix(_HYDRA), True),
    (_prefix(RAY), False),
    # a Determined log relayed once more (printed by a job that srun, mpirun or kubectl then
    # labels): its prefix comes after the relaying tool's own
    (_prefix(DETERMINED), False),
)


def _common(lines: list[str], strip: Callable[[str], object]) -> bool:
    """Whether a wrapper opens most of the non-blank lines (a delivering tool wraps each)."""
    filled = [ln for ln in lines if ln.strip()]
    hits = sum(1 for ln in filled if strip(ln) is not None)
    return bool(filled) and hits * 2 > len(filled)


def _records(
    lines: list[str], named: list[str | None]
) -> tuple[list[str], list[str | None], list[str]]:
    """Container-runtime records (CRI, docker json-file, journald json) as their messages,
    partial records joined; (messages, hosts, the delivered line(s) of each), a line's host
    the record's or else the one `named` gives it (an aggregator's)."""
    crit = [ln for ln in lines if ln.strip()]
    cri = bool(crit) and sum(1 for ln in crit if CRI.match(ln)) * 2 > len(crit)
    out: list[str] = []
    hosts: list[str | None] = []
    raws: list[str] = []
    pending: tuple[str, str] | None = None  # a partial record's text and its delivered lines
    for line, outer in zip(lines, named, strict=True):
        msg, host, complete = line, None, True
        m = CRI.match(line) if cri else None
        if m:
            msg, complete = line[m.end() :], m["tag"] == "F"
        elif (rec := _json_line(line)) is not None:
            msg, host, complete = rec
        if pending is not None:
            msg, raw = pending[0] + msg, f"{pending[1]}\n{line}"
        else:
            raw = line
        if not complete and len(msg) < MAX_JSON:
            pending = (msg, raw)
            continue
        pending = None
        out.append(msg)
        hosts.append(host or outer)
        raws.append(raw)
    if pending is not None:
        out.append(pending[0])
        hosts.append(None)
        raws.append(pending[1])
    return out, hosts, raws


def undelivered(text: str) -> Delivered:
    """The text's lines without the wrappers that delivered them (CRLF, ANSI escapes,
    container-runtime records, launcher and kubectl prefixes), each with the host a wrapper
    named; the text's own lines, unchanged, where no wrapper is found."""
    delivered = _single_spaced(text.splitlines())
    source = [_ANSI.sub("", ln) for ln in delivered] if "\x1b" in text else delivered
    # read as printed: a paste's no-break spaces or smart quotes must not hide a wrapper's or a
    # syslog line's shape any more than a rule's (collector/parse/transcribe.py)
    source = [transcribed(ln) for ln in source]
    lines, hosts, raws = _records(*unaggregated(_unpasted(source)))
    if len(raws) == len(delivered):  # nothing joined: quote each line as the text has it
        raws = delivered
    labels: list[dict[str, int]] = [{} for _ in lines]
    streams: list[str | None] = [None for _ in lines]
    for strip, most in _PREFIXES:
        if most and not _common(lines, strip):
            continue
        for i, ln in enumerate(lines):
            got = strip(ln)
            if got is not None:
                lines[i], hosts[i] = got[0], hosts[i] or got[1]
                labels[i] = {**got[2], **labels[i]}  # the outer label wins
                if got[3]:  # nested wrappers (kubectl --prefix around srun's) name it together
                    streams[i] = f"{streams[i]} {got[3]}" if streams[i] else got[3]
    verbatim: dict[str, str] = {}
    said: dict[str, dict[str, int]] = {}
    for ln, raw, label in zip(lines, raws, labels, strict=True):
        if ln != raw:
            verbatim.setdefault(ln, raw)
        if label:
            said.setdefault(ln.strip(), label)
    return Delivered(lines=lines, hosts=hosts, verbatim=verbatim, labels=said, streams=streams)
