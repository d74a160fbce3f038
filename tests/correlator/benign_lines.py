"""Benign distractors: warnings and notices a HEALTHY GPU training run prints, put into a log.
Used by test_explain_distractors_metamorphic.py.

Real logs carry deprecation notices, launcher notes, plugin-probe INFO lines and container
banners around the failure; none of them is a fault. Each message below is worded as its
emitter's source writes it (the source is cited above each), as the whole message (a Python
warning with the source line the warnings module prints under it, a banner with its rules), and
goes into a text where a paragraph starts (after a blank line, before the first line or after
the last), never inside one message; a message printed only at exit goes after the last line.
Deterministic: seeded by the case's file name.

Left out on purpose, each with why it is no benign line on a GPU job:
- Open MPI's "WARNING: There was an error initializing an OpenFabrics device." (open-mpi/ompi
  v4.1.8 opal/mca/btl/openib/help-mpi-btl-openib.txt [error in device init]): its help text
  reports an error from the device with its "Local host:" and "Local device:" and says nothing
  of it being harmless; the device may really be failing (unlike [no devices right type], which
  says the BTL "will be ignored for this run").
- the CUDA images' "WARNING: The NVIDIA Driver was not detected.  GPU functionality will not be
  available.": on a GPU job that is the fault itself (no driver inside the container).
- NGC's "NOTE: The SHMEM allocation limit is set to the default of 64MB.  This may be
  insufficient for PyTorch.": a too small /dev/shm is how DataLoader workers die of SIGBUS,
  evidence the signal reasoner rightly weighs.
- NGC's "NOTE: MOFED driver for multi-node communication was not detected.": multi-node
  communication over a slower path, which bears on interconnect verdicts.
- `srun: lua: Submitted job ...`: the text after "lua: " is written by each site's
  job_submit.lua (SchedMD/slurm src/lua/slurm_lua.c only adds the "lua" prefix), so there is no
  emitter wording to take.
"""

from __future__ import annotations

import random
import re
import zlib
from dataclasses import dataclass

from tests.correlator.neighbour_lines import _in_banner, _is_address, _stream_prefix, neighbours


@dataclass(frozen=True)
class Benign:
    """One benign message: its lines ("{host}", "{addr}" filled in), and where it may go."""

    name: str
    lines: tuple[str, ...]
    names_host: bool = False  # needs a host of the job (NCCL's prefix, ssh's host)
    at_exit: bool = False  # printed when the process exits: after the last line
    socket_only: bool = False  # only on a host whose NCCL has no RDMA device (no IB in the text)


# NVIDIA/nccl src/debug.cc ncclDebugLog: "%s:%d:%d [%d] NCCL INFO " (host, pid, tid, cudaDev)
_NCCL = "{host}:{pid}:{tid} [0] NCCL INFO "
# what NCCL prints after its net plugin's fallback on a host with no RDMA device (below)
_SOCKET_ONLY = (
    _NCCL + "NET/IB : No device found.",
    _NCCL + "NET/Socket : Using [0]eth0:{addr}<0>",
    _NCCL + "Using network Socket",
)

BENIGN: tuple[Benign, ...] = (
    # torch/storage.py _warn_typed_storage_removal: warnings.warn(message, UserWarning), as
    # Python's warnings.formatwarning prints it ("%s:%s: %s: %s\n" and the source line under it)
    Benign(
        "typed_storage_deprecated",
        (
            "/opt/conda/lib/python3.10/site-packages/torch/_utils.py:831: UserWarning: "
            "TypedStorage is deprecated. It will be removed in the future and UntypedStorage will "
            "be the only storage class. This should only matter to you if you are using storages "
            "directly.  To access UntypedStorage directly, use tensor.untyped_storage() instead of "
            "tensor.storage()",
            "  return self.fget.__get__(instance, owner)()",
        ),
    ),
    # torch/cuda/amp/autocast_mode.py autocast.__init__: @deprecated(..., FutureWarning)
    Benign(
        "cuda_amp_autocast_deprecated",
        (
            "/workspace/train.py:142: FutureWarning: `torch.cuda.amp.autocast(args...)` is "
            "deprecated. Please use `torch.amp.autocast('cuda', args...)` instead.",
            "  with torch.cuda.amp.autocast(enabled=True):",
        ),
    ),
    # torch/cuda/amp/grad_scaler.py GradScaler.__init__: @deprecated(..., FutureWarning)
    Benign(
        "cuda_amp_gradscaler_deprecated",
        (
            "/workspace/train.py:88: FutureWarning: `torch.cuda.amp.GradScaler(args...)` is "
            "deprecated. Please use `torch.amp.GradScaler('cuda', args...)` instead.",
            "  scaler = torch.cuda.amp.GradScaler()",
        ),
    ),
    # torch/distributed/run.py config_from_args: log.warning("\n*****...\nSetting OMP_NUM_THREADS
    # ...as needed. \n*****...") through logging's BASIC_FORMAT "%(levelname)s:%(name)s:%(message)s"
    Benign(
        "torchrun_omp_num_threads",
        (
            "WARNING:torch.distributed.run:",
            "*****************************************",
            "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to "
            "avoid your system being overloaded, please further tune the variable for optimal "
            "performance in your application as needed. ",
            "*****************************************",
        ),
    ),
    # torch/distributed/elastic/multiprocessing/redirects.py get_libc: logger.warning(...) on
    # Windows and macOS hosts, through torch._logging's "[%(asctime)s] %(name)s: [%(levelname)s]"
    Benign(
        "elastic_redirects_note",
        (
            "[2024-03-05 10:21:44,118] torch.distributed.elastic.multiprocessing.redirects: "
            "[WARNING] NOTE: Redirects are currently not supported in Windows or MacOs.",
        ),
    ),
    # huggingface/tokenizers bindings/python/src/lib.rs child_after_fork: println! of three
    # messages when a process forks after the Rust thread pool was used
    Benign(
        "tokenizers_fork_parallelism",
        (
            "huggingface/tokenizers: The current process just got forked, after parallelism has "
            "already been used. Disabling parallelism to avoid deadlocks...",
            "To disable this warning, you can either:",
            "\t- Avoid using `tokenizers` before the fork if possible",
            "\t- Explicitly set the environment variable TOKENIZERS_PARALLELISM=(true | false)",
        ),
    ),
    # huggingface/transformers src/transformers/modeling_utils.py _load_pretrained_model:
    # logger.warning(f"Some weights of {cls} were not initialized ...\nYou should probably TRAIN")
    Benign(
        "transformers_newly_initialized_weights",
        (
            "Some weights of BertForSequenceClassification were not initialized from the model "
            "checkpoint at bert-base-uncased and are newly initialized: ['classifier.bias', "
            "'classifier.weight']",
            "You should probably TRAIN this model on a down-stream task to be able to use it for "
            "predictions and inference.",
        ),
    ),
    # microsoft/DeepSpeed op_builder/async_io.py is_compatible and check_for_libaio_pkg through
    # op_builder/builder.py warning(): print(f"{WARNING} {msg}"), WARNING = " [WARNING] " in
    # yellow (the colour codes dropped, as a saved log has them)
    Benign(
        "deepspeed_async_io_libaio",
        (
            " [WARNING]  async_io requires the dev libaio .so object and headers but these were "
            "not found.",
            " [WARNING]  async_io: please install the libaio-dev package with apt",
            " [WARNING]  If libaio is already installed (perhaps from source), try setting the "
            "CFLAGS and LDFLAGS environment variables to where it can be found.",
        ),
    ),
    # the nvidia/cuda images' entrypoint banner (gitlab.com/nvidia/container-images/cuda
    # entrypoint.d; as ray-project/ray ci/ray_ci/container.py _CUDA_COPYRIGHT reproduces it)
    Benign(
        "cuda_container_banner",
        (
            "==========",
            "== CUDA ==",
            "==========",
            "",
            "CUDA Version 12.1.1",
            "",
            "Container image Copyright (c) 2016-2023, NVIDIA CORPORATION & AFFILIATES. All rights "
            "reserved.",
            "",
            "This container image and its contents are governed by the NVIDIA Deep Learning "
            "Container License.",
            "By pulling and using the container, you accept the terms and conditions of this "
            "license:",
            "https://developer.nvidia.com/ngc/nvidia-deep-learning-container-license",
            "",
            "A copy of this license is made available in this container at "
            "/NGC-DL-CONTAINER-LICENSE for your convenience.",
        ),
    ),
    # SchedMD/slurm src/api/allocate.c: info("job %u queued and waiting for resources") and
    # info("job %u has been allocated resources"), srun's log prefix "srun: "
    Benign(
        "srun_queued_then_allocated",
        (
            "srun: job {job} queued and waiting for resources",
            "srun: job {job} has been allocated resources",
        ),
    ),
    # NVIDIA/nccl v2.18.3-1 src/net.cc initNetPluginLib: INFO "NET/Plugin : Plugin load (%s)
    # returned %d : %s" and "NET/Plugin : No plugin found, using internal implementation";
    # src/transport/net_ib.cc "NET/IB : No device found."; src/transport/net_socket.cc
    # "NET/Socket : Using%s" (" [%d]%s:%s", ncclSocketToString's "addr<port>"); src/init.cc
    # "Using network %s": a host with no RDMA device, that runs NCCL over TCP sockets
    Benign(
        "nccl_socket_transport_v2_18",
        (
            _NCCL + "NET/Plugin : Plugin load (libnccl-net.so) returned 2 : libnccl-net.so: "
            "cannot open shared object file: No such file or directory",
            _NCCL + "NET/Plugin : No plugin found, using internal implementation",
            *_SOCKET_ONLY,
        ),
        names_host=True,
        socket_only=True,
    ),
    # NVIDIA/nccl v2.26.2-1 src/plugin/plugin_open.cc openPluginLib: INFO "%s/Plugin: Could not
    # find:%s. %s" with the fallback "Using internal net plugin.", then as above
    Benign(
        "nccl_socket_transport_v2_26",
        (
            _NCCL + "NET/Plugin: Could not find: libnccl-net.so. Using internal net plugin.",
            *_SOCKET_ONLY,
        ),
        names_host=True,
        socket_only=True,
    ),
    # openssh-portable sshconnect.c check_host_key: logit("Warning: Permanently added '%.200s'
    # (%s) to the list of known hosts.") when a launcher (mpirun, pdsh) first reaches a node
    Benign(
        "ssh_known_hosts_added",
        ("Warning: Permanently added '{host}' (ED25519) to the list of known hosts.",),
        names_host=True,
    ),
    # torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp ~ProcessGroupNCCL: TORCH_WARN_ONCE(...)
    # at every exit that did not call destroy_process_group (PyTorch >= 2.4), through c10's
    # "[W<MMDD hh:mm:ss.ns> <file>:<line>] Warning: <msg> (function <fn>)" and the "[rank0]:"
    # prefix torch puts on a distributed process's C++ log lines
    Benign(
        "process_group_not_destroyed_at_exit",
        (
            "[rank0]:[W530 08:34:35.154236112 ProcessGroupNCCL.cpp:1250] Warning: WARNING: process "
            "group has NOT been destroyed before we destruct ProcessGroupNCCL. On normal program "
            "exit, the application should call destroy_process_group to ensure that any pending "
            "NCCL operations have finished in this process. In rare cases this process can exit "
            "before this point and block the progress of another member of the process group. "
            "This constraint has always been present,  but this warning has only been added since "
            "PyTorch 2.4 (function operator())",
        ),
        at_exit=True,
    ),
)

# a text that shows an RDMA device in use (or named at all) gets no "NET/IB : No device found."
_RDMA = re.compile(r"NET/IB|\bmlx\d|\bibv_|infiniband|\bRoCE\b|\bIB\b|\bhfi1|\befa\b|GDR", re.I)


def filled(b: Benign, host: str, rng: random.Random) -> list[str]:
    """The message's lines for `host` (an address names its node as EC2 does: "ip-10-1-2-3")."""
    name = "ip-" + host.replace(".", "-").replace(":", "-") if _is_address(host) else host
    addr = host if _is_address(host) else f"10.{rng.randrange(1, 250)}.{rng.randrange(1, 250)}."
    addr += "" if _is_address(host) else str(rng.randrange(2, 250))
    pid = rng.randrange(1000, 99999)
    values = {"host": name, "addr": addr, "pid": pid, "tid": pid + rng.randrange(1, 400)}
    values["job"] = rng.randrange(1000, 900000)
    return [ln.format(**values) for ln in b.lines]


def eligible(text: str, culprit: str | None) -> list[Benign]:
    """The messages that fit `text`: host-naming ones only beside a culprit, NCCL's socket
    transport only where no RDMA device shows."""
    rdma = bool(_RDMA.search(text))
    return [b for b in BENIGN if (culprit or not b.names_host) and not (b.socket_only and rdma)]


def _paragraph_starts(lines: list[str]) -> list[int]:
    banner = _in_banner(lines)
    return [
        i
        for i in range(1, len(lines))
        if not lines[i - 1].strip() and lines[i][:1].strip() and not banner[i]
    ]


def with_benign(text: str, file: str, culprit: str | None) -> str:
    """`text` with 2-4 benign messages where paragraphs start; a host-naming message names a
    host of the job other than the culprit, named as the culprit is."""
    rng = random.Random(zlib.crc32(f"benign#{file}".encode()))
    lines = text.splitlines()
    pool = eligible(text, culprit)
    chosen = rng.sample(pool, min(len(pool), rng.randrange(2, 5)))
    other = neighbours(culprit, text, 1, rng)[0] if culprit else ""
    spots = sorted({0, len(lines), *_paragraph_starts(lines)})
    pre = _stream_prefix(lines)
    inserts: dict[int, list[str]] = {}
    for b in chosen:
        at = len(lines) if b.at_exit else rng.choice(spots)
        # a message of its own: a blank line after it unless the text ends there
        block = [pre + ln if ln else ln for ln in filled(b, other, rng)]
        inserts.setdefault(at, []).extend([*block, ""] if at < len(lines) else ["", *block])
    out: list[str] = []
    for i, line in enumerate([*lines, None]):
        out.extend(inserts.get(i, []))
        if line is not None:
            out.append(line)
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")
