"""Filesystem and OS-resource failures as a training job sees them (probe set twelve).

Formats, from the emitters' own sources:
- python/cpython Objects/exceptions.c @v3.11.7 OSError_str: "[Errno %S] %S: %R" (errno, glibc's
  strerror text, the filename's repr), "[Errno %S] %S" without a filename; the class by errno
  (PermissionError for EACCES, OSError for ENOSPC, EDQUOT, EIO, EROFS, EMFILE, ENFILE,
  ENOTCONN, ESTALE, ENOMEM).
- python/cpython Lib/multiprocessing/reduction.py @v3.11.7 recvfds: "received %d items of
  ancdata"; pytorch/pytorch torch/utils/data/dataloader.py @0025348e03 _try_get_data's EMFILE
  message and its NOTE [ DataLoader on Linux and open files limit ] tying the two together.
- pytorch/pytorch aten/src/ATen/MapAllocator.cpp @9de0cafe3c: "unable to open shared memory
  object <%s> in read-write mode: %s (%d)", "unable to write to file <%s>: %s (%d)"
  (c10::utils::str_error, errno); newer versions of the file (a copy whose commit the code index
  did not give) add posix_fallocate's "unable to allocate shared memory(shm) for file <%s>: %s
  (%d)".
- pytorch/pytorch caffe2/serialize/inline_container.cc @02b040c187: "PytorchStreamWriter failed
  " what info ": " mz_zip_get_error_string ("writing file data/0: file write failed"), and
  "unexpected pos %d vs %d", behind c10's "[enforce fail at inline_container.cc:N] . ".
- coreutils src/copy.c, src/tee.c, src/ls.c @v9.4: "cp: error writing %s", "cp: cannot create
  regular file %s", "tee: %s", "ls: cannot access %s", each followed by ": " and strerror.
Deliveries: the exception line a traceback ends with, torchrun's "[rankN]: " prefix, srun's
"N: " label, a journald line of the job's process (its host field names the host).

Verdicts by the label policy (tests/fixtures/corpus/README.md) and the house readings
(correlator/rules/patterns_job.py node_io and host_oom): a full disk ("No space left on
device"), a file system gone read-only, a stale NFS handle and an I/O error are the node's
(node / node; the policy's "full local disk", training case 232); ENOMEM is host memory the job
used (oom_host / job); the job's own quota and its own open-files limit (EMFILE, DataLoader's
"received 0 items of ancdata") are the job's (user_code / job), as is a permission refused;
/dev/shm full is oom_host / job (as pytorch.json's dataloader_shm); the system-wide file table
(ENFILE) is the node's with no visible culprit process (node / unknown); a dead FUSE mount
(ENOTCONN on a path) is the node's storage infra (node / infra); torch.save's writer failing
without an errno is node / unknown. The culprit is the host only where a host convention names
it (the journald host field); torchrun's and srun's rank labels name none.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text
from tests.correlator.emitter_probe import HOSTS, Fmt, check, params, strerror

CPYTHON = "python/cpython Objects/exceptions.c@v3.11.7"
REDUCTION = "python/cpython Lib/multiprocessing/reduction.py@v3.11.7"
DATALOADER = "pytorch/pytorch torch/utils/data/dataloader.py@0025348e03"
MAPALLOC = "pytorch/pytorch aten/src/ATen/MapAllocator.cpp@9de0cafe3c"
WRITER = "pytorch/pytorch caffe2/serialize/inline_container.cc@02b040c187"
COREUTILS = "coreutils src/copy.c, src/tee.c, src/ls.c@v9.4"

NODE = ("node", "node")
JOB = ("user_code", "job")
HOST_OOM = ("oom_host", "job")
MOUNT = ("node", "infra")

# how a Python exception line reaches the log a user pastes (no host named)
_PY = (
    "",
    'Traceback (most recent call last):\n  File "train.py", line {line}, in save\n'
    "    torch.save(state, path)\n",
    "[rank{rank}]: ",
    "{rank}: ",
)
# a journald line of the job's process: the host field names the host it happened on
_JOURNAL = ("Nov 29 05:0{rank}:01 {host} python3[{pid}]: ",)
_AXES = {"line": (88, 412, 1021), "rank": (0, 3, 7), "pid": (3117, 90221, 48)}
PATHS = (
    "/ckpt/step_100/model.pt",
    "/scratch/run-17/checkpoint-4000/optimizer.bin",
    "/home/alice/.cache/torch/kernels/x.so",
    "/data/imagenet/train/n01440764/n01440764_10026.JPEG",
)
_CLASS = {"EACCES": "PermissionError"}


def oserror(errno_name: str, number: int, want: tuple, host: bool = False) -> Fmt:
    """OSError_str's "[Errno N] strerror: 'path'" behind each delivery (journald: with its host)."""
    exc = _CLASS.get(errno_name, "OSError")
    return Fmt(
        f"{errno_name.lower()}{'-host' if host else ''}",
        CPYTHON,
        f"{exc}: [Errno {number}] {strerror(errno_name)}: '{{path}}'\n",
        {"path": PATHS, "host": HOSTS[:4], **_AXES},
        want,
        culprit="host" if host else None,
        prefixes=_JOURNAL if host else _PY,
    )


CPYTHON_FORMATS = [
    oserror("ENOSPC", 28, NODE),
    oserror("ENOSPC", 28, NODE, host=True),
    oserror("EROFS", 30, NODE),
    oserror("EROFS", 30, NODE, host=True),
    oserror("ESTALE", 116, NODE),
    oserror("EIO", 5, NODE),
    oserror("EIO", 5, NODE, host=True),
    oserror("EDQUOT", 122, JOB),
    oserror("EMFILE", 24, JOB),
    oserror("EACCES", 13, JOB),
    oserror("ENFILE", 23, ("node", "unknown")),
    oserror("ENOTCONN", 107, MOUNT),
    oserror("ENOTCONN", 107, MOUNT, host=True),
    Fmt(
        "enomem-no-path",
        CPYTHON,
        f"OSError: [Errno 12] {strerror('ENOMEM')}\n",
        _AXES,
        HOST_OOM,
        prefixes=_PY,
    ),
]

_COREUTILS = (
    "cp: error writing '{path}': {err}\n",
    "cp: cannot create regular file '{path}': {err}\n",
    "tee: {path}: {err}\n",
    "ls: cannot access '{path}': {err}\n",
    "mkdir: cannot create directory '{path}': {err}\n",
)


def coreutils(key: str, errs: tuple[str, ...], want: tuple) -> list[Fmt]:
    """Each coreutils form of copy.c / tee.c / ls.c with strerror's texts for `errs`."""
    return [
        Fmt(
            f"{key}-{i}",
            COREUTILS,
            form,
            {"path": PATHS, "err": tuple(strerror(e) for e in errs), **_AXES},
            want,
            prefixes=("", "{rank}: "),
        )
        for i, form in enumerate(_COREUTILS)
    ]


COREUTILS_FORMATS = [
    *coreutils("cu-node", ("ENOSPC", "EROFS", "ESTALE", "EIO"), NODE),
    *coreutils("cu-quota", ("EDQUOT",), JOB),
    *coreutils("cu-mount", ("ENOTCONN",), MOUNT),
]

_ENFORCE = "RuntimeError: [enforce fail at inline_container.cc:{line}] . "
_SHM = ("/torch_34514_2312401400", "/torch_2276740_2849291446_0", "/dev/shm/torch_9_1")
TORCH_FORMATS = [
    Fmt(
        "writer-file",
        WRITER,
        _ENFORCE + "PytorchStreamWriter failed writing file {rec}: file write failed\n",
        {"rec": ("data/0", "data/140", "data/303", "version"), **_AXES},
        ("node", "unknown"),
        prefixes=_PY,
    ),
    Fmt(
        "writer-directory",
        WRITER,
        _ENFORCE
        + "PytorchStreamWriter failed writing central directory{info}: file write failed\n",
        {"info": ("", " for archive model", " for archive archive"), **_AXES},
        ("node", "unknown"),
        prefixes=_PY,
    ),
    Fmt(
        "writer-pos",
        WRITER,
        _ENFORCE + "unexpected pos {a} vs {b}\n",
        {"a": (155797120, 64, 2147483712), "b": (155797008, 0, 2147483648), **_AXES},
        ("node", "unknown"),
        prefixes=_PY,
    ),
    Fmt(
        "ancdata",
        REDUCTION,
        "RuntimeError: received {n} items of ancdata\n",
        {"n": (0, 2), **_AXES},
        JOB,
        prefixes=_PY,
    ),
    Fmt(
        "dataloader-emfile",
        DATALOADER,
        "RuntimeError: Too many open files. Communication with the workers is no longer "
        "possible. Please increase the limit using `ulimit -n` in the shell or change the "
        "sharing strategy by calling `torch.multiprocessing.set_sharing_strategy('file_system')`"
        " at the beginning of your code\n",
        _AXES,
        JOB,
        prefixes=_PY,
    ),
    Fmt(
        "shm-open-emfile",
        MAPALLOC,
        "RuntimeError: unable to open shared memory object <{shm}> in read-write mode: "
        "Too many open files (24)\n",
        {"shm": _SHM, **_AXES},
        JOB,
        prefixes=_PY,
    ),
    Fmt(
        "shm-full",
        MAPALLOC,
        "RuntimeError: unable to {op} <{shm}>: {err}\n",
        {
            "op": ("allocate shared memory(shm) for file", "write to file"),
            "shm": _SHM,
            "err": ("No space left on device (28)", "Cannot allocate memory (12)"),
            **_AXES,
        },
        HOST_OOM,
        prefixes=_PY,
    ),
]


@pytest.mark.parametrize(("f", "text", "node"), params(CPYTHON_FORMATS))
def test_cpython_oserror_reads_by_errno(f: Fmt, text: str, node: str | None) -> None:
    check(f, text, node)


@pytest.mark.parametrize(("f", "text", "node"), params(COREUTILS_FORMATS))
def test_coreutils_errors_read_by_errno(f: Fmt, text: str, node: str | None) -> None:
    check(f, text, node)


@pytest.mark.parametrize(("f", "text", "node"), params(TORCH_FORMATS))
def test_pytorch_checkpoint_and_dataloader_errors(f: Fmt, text: str, node: str | None) -> None:
    check(f, text, node)


@pytest.mark.parametrize(
    "text",
    [
        "[rank3]: OSError: [Errno 28] No space left on device: '/ckpt/step_100/model.pt'\n",
        "3: OSError: [Errno 30] Read-only file system: '/ckpt/x'\n",
        "tee: /ckpt/log.txt: Read-only file system\n",
        "OSError: [Errno 5] Input/output error: '/data/shard-0001.tar'\n",
    ],
)
def test_node_fault_without_a_host_convention_names_no_node(text: str) -> None:
    assert explain_text(text).node is None


@pytest.mark.parametrize(
    "text",
    [
        # a socket's ENOTCONN (no path): not a dead mount
        "terminate called after throwing an instance of 'std::system_error'\n"
        "  what():  Transport endpoint is not connected\n",
        "OSError: [Errno 107] Transport endpoint is not connected\n",
    ],
)
def test_socket_enotconn_is_not_read_as_a_dead_mount(text: str) -> None:
    assert (explain_text(text).category, explain_text(text).blame) != MOUNT


def test_system_file_table_full_is_not_the_jobs_own_limit() -> None:
    got = explain_text("OSError: [Errno 23] Too many open files in system: '/data/x'\n")
    assert (got.category, got.blame) == ("node", "unknown")


def test_a_full_disk_outranks_the_writer_failure_it_causes() -> None:
    text = (
        "OSError: [Errno 28] No space left on device\n"
        "RuntimeError: [enforce fail at inline_container.cc:783] . PytorchStreamWriter failed "
        "writing file data/140: file write failed\n"
    )
    got = explain_text(text)
    assert (got.category, got.blame) == NODE


def test_the_sharing_strategy_advice_alone_is_no_failure() -> None:
    text = "torch.multiprocessing.set_sharing_strategy('file_system')\n"
    assert explain_text(text).category is None


def test_a_go_daemons_lowercase_emfile_is_not_read_as_the_jobs_limit() -> None:
    # Go's syscall texts are lowercase ("too many open files"): kubelet's inotify limit is the
    # node's, not a job's; the family matches glibc's capitalised strerror text only
    text = (
        "Nov 29 05:00:01 gpu-a-07 kubelet[2211]: E1129 05:00:01.000000    2211 kubelet.go:1431] "
        '"Failed to start cAdvisor" err="inotify_init: too many open files"\n'
    )
    assert explain_text(text).blame != "job"
