"""Log-pattern rules written from the emitters' own sources, one JSON file per emitter family.

Each file names the family, the sources its messages were read from (repository, path and
commit, or a documentation URL), and its rules. A rule is a regex over one line (or one event's
text) and the verdict that the emitter's documented meaning gives it:

    {"name", "pattern", "means", "category", "blame", "confidence", "priority", "summary",
     "action", optional "root_cause" (default true), "culprit" ("printer" | "peer" | "none"),
     "culprit" "peer" may capture the peer's MPI rank in group `peer_rank` instead of its host
     (named where the text shows where that rank ran, explain/hosts_ranks.py),
     "culprit" may also be "peer_or_printer" (the named peer, else the host that logged it),
     or "printer_names_peer" (the host that logged it; the peer group is kept as peer_named),
     "reason" ("exit" | "xid": the verdict comes from the signal reasoner or the Xid catalog;
     "xid_mention": from the catalog, for a catalogued code, capped at the rule's confidence
     and priority),
     "shell" (exit codes use 128 + signal), "mod256" (an exit status of 256 - N is a launcher's
     sys.exit(-N) for its child's signal N), "kinds" (limit to these event kinds),
     "fallback" (true: the family's catch-all for its generic failure line, tried after every
     specific rule of every family),
     "outcome" ("names": a health check's failure or a drain whose message, group `cause`,
     may name the fault it found, read by the other rules; "generic": a check failure that
     carries no cause, explained by a fault the text shows beside it; see rules/checks.py)}

`means` quotes or paraphrases the source's own meaning of the message; it is documentation and
is checked only for being present.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

from correlator.rules.pattern_rule import PatternRule, _p
from correlator.taxonomy import Blame, Category
from timeline.models import EventKind

_RULE_KEYS = {"name", "pattern", "means", "category", "blame", "confidence", "priority"}
_OPTIONAL = {
    "summary",
    "action",
    "root_cause",
    "culprit",
    "reason",
    "shell",
    "mod256",
    "kinds",
    "flags",
    "fallback",
    "outcome",
}


@dataclass(frozen=True)
class Family:
    """One emitter family: where its messages come from and the rules written from them."""

    name: str
    title: str
    sources: tuple[dict[str, str], ...]
    rules: tuple[PatternRule, ...]


def _rule(family: str, spec: dict[str, Any]) -> PatternRule:
    missing = _RULE_KEYS - set(spec)
    unknown = set(spec) - _RULE_KEYS - _OPTIONAL
    if missing or unknown:
        raise ValueError(f"{family}/{spec.get('name')}: missing {missing}, unknown {unknown}")
    if spec.get("outcome", "") not in ("", "names", "generic"):
        raise ValueError(f"{family}/{spec['name']}: outcome {spec['outcome']!r}")
    category = None if spec["category"] is None else Category(spec["category"])
    kinds = spec.get("kinds")
    flags = {"case": 0, "multiline": re.I | re.M}.get(spec.get("flags", ""), re.I)
    return _p(
        spec["name"],
        re.compile(spec["pattern"], flags),
        category,
        Blame(spec["blame"]),
        action=spec.get("action", ""),
        confidence=float(spec["confidence"]),
        summary=spec.get("summary", ""),
        root_cause=bool(spec.get("root_cause", True)),
        priority=int(spec["priority"]),
        kinds=frozenset(EventKind(k) for k in kinds) if kinds else None,
        family=family,
        culprit=spec.get("culprit", "printer"),
        reason=spec.get("reason", ""),
        shell=bool(spec.get("shell", False)),
        mod256=bool(spec.get("mod256", False)),
        fallback=bool(spec.get("fallback", False)),
        outcome=spec.get("outcome", ""),
    )


def _load(name: str) -> Family:
    data = json.loads(resources.files(__name__).joinpath(name).read_text("utf-8"))
    if not data.get("sources"):
        raise ValueError(f"{name}: an emitter family needs its sources")
    rules = tuple(_rule(data["family"], spec) for spec in data["rules"])
    return Family(data["family"], data["title"], tuple(data["sources"]), rules)


# Order matters: the first rule whose regex matches an event's text wins, so the families whose
# messages are most specific come first and the launchers' exit statuses (weakest) come last.
FAMILY_FILES = (
    # NHC first: its check messages quote nvidia-smi's and name their check, which decides
    "nhc.json",
    # NVSentinel's health events name their check, which decides over the mnemonic they quote
    "nvsentinel.json",
    "dcgm.json",
    # the EKS agent's messages quote DCGM's findings: after dcgm.json, whose texts are surer
    "eks_node_monitoring.json",
    "nvidia_smi.json",
    # probe set 32: the container runtimes' GPU container errors (libnvidia-container's device
    # selection, CDI, containerd/docker runtime handlers): before device_plugin.json, whose
    # container_cli_init reads every nvidia-container-cli error as the node's
    "container_runtime.json",
    "device_plugin.json",
    # the GPU operator's MIG manager (probe set 30): before the launchers' bare exit statuses, which
    # its "failed to apply MIG configuration: exit status 1" would otherwise read as the job's
    "mig_manager.json",
    # after the device plugin's nvidia-container-cli texts, which apptainer quotes; before
    # kubelet.json, whose exec-not-found is the image's (nvidia-container-cli is the host's)
    "apptainer.json",
    "linux_kernel.json",
    # probe set 28: the shared file systems' clients and daemons (GPFS's mmfs, BeeGFS's kernel
    # module), beside the kernel's own NFS and Lustre lines
    "gpfs.json",
    "beegfs.json",
    # TensorRT / TensorRT-LLM (probe set 32): their out-of-memory texts before cuda.json's
    "tensorrt.json",
    "cuda.json",
    # GPUDirect Storage's status strings name the cuFile error, not a CUDA one
    "cufile.json",
    # NVSHMEM (probe set 30): its error macros name the file, not a host; before nccl.json, whose
    # IB and CUDA-failure rules read some of its lines with NCCL's wording
    "nvshmem.json",
    # GPUDirect RDMA's kernel pieces (probe set 30): nvidia-peermem, nv_peer_mem, gdrcopy
    "gpudirect.json",
    # RMM's device out-of-memory is a std::bad_alloc by type: read before the host OOM rule
    "rmm.json",
    "triton.json",
    "nccl.json",
    "ib_verbs.json",
    "fabric_manager.json",
    # the IMEX daemon shares Fabric Manager's log prefix; its messages are its own
    "imex.json",
    "fabric.json",
    "rocm.json",
    "mpi.json",
    "jax.json",
    "megatron.json",
    "deepspeed.json",
    "tensorflow.json",
    "ray.json",
    # SkyPilot (probe set 32): its provisioner's capacity failures, raised as Python exceptions
    "skypilot.json",
    "dask.json",
    "spark_yarn.json",
    "htcondor.json",
    # after the stacks that wrap gRPC statuses in their own messages (JAX, TF, Ray)
    "grpc.json",
    "horovod.json",
    "lightning.json",
    "pytorch.json",
    # errno texts (glibc's, as CPython and coreutils print them): after the stacks that quote one
    # inside their own messages (NCCL's /dev/shm, the DataLoader's bus error)
    "os_errors.json",
    # vLLM's wrappers quote the cause's text (CUDA, NCCL, torch): after those families
    "vllm.json",
    # Composer's auto-microbatching warning quotes "CUDA out of memory": an emitter rule, so
    # read before patterns_job's out-of-memory rule
    "composer.json",
    # torchft's wrappers quote the error they caught: after the families that read it
    "resiliency.json",
    "kube_scheduler.json",
    "volcano.json",
    # Kueue (probe set 30): its Workload events and conditions, beside the other batch schedulers
    "kueue.json",
    "node_problem_detector.json",
    "kubelet.json",
    "karpenter.json",
    # the clouds' node-lifecycle notices (probe set 25): host errors, maintenance, repair and
    # Spot/preemption; AKS's repair events quote NotReady, which kubelet.json's rules also read
    "gce.json",
    "gke.json",
    "aks.json",
    "azure_scheduled_events.json",
    "aws_nth.json",
    "kubeflow.json",
    # ParallelCluster's clustermgtd sets Slurm reasons of its own: before slurm.json's reason line
    "parallelcluster.json",
    # EC2's own event documents: after clustermgtd's lines, which quote a scheduled event's Code
    "ec2.json",
    # pyxis before slurm.json: its container-start errors come through slurmstepd's error lines
    "pyxis.json",
    "slurm.json",
    "flux.json",
    "launchers.json",
    "xid_quoted.json",
)
FAMILIES: tuple[Family, ...] = tuple(_load(f) for f in FAMILY_FILES)
EMITTER_RULES: tuple[PatternRule, ...] = tuple(
    r for fam in FAMILIES for r in fam.rules if not r.fallback
)
# Each family's catch-all for its generic failure line: weak, so tried after every other rule.
EMITTER_FALLBACKS: tuple[PatternRule, ...] = tuple(
    r for fam in FAMILIES for r in fam.rules if r.fallback
)
