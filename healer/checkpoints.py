"""Find the newest *complete* checkpoint under a job's checkpoint directory.

Each layout is recognised by the files its own library writes, and by the marker that library
writes last (so a checkpoint without it was cut off mid-save):

- torch.distributed.checkpoint (torch/distributed/checkpoint/filesystem.py, FileSystemWriter):
  `__<rank>_<n>.distcp` data files, then `.metadata.tmp` renamed to `.metadata` in finish().
- Lightning (lightning/fabric/utilities/cloud_io.py, _atomic_save): one `*.ckpt` file written by
  torch.save (a zip archive: complete only with its end-of-central-directory record); `last.ckpt`
  may be a symlink; default names `epoch=E-step=S.ckpt`.
- Hugging Face Trainer (transformers/trainer.py, _save_checkpoint): `checkpoint-<step>/`,
  `trainer_state.json` written after the model, optimizer and RNG state; 4.36-4.37 staged it in
  `tmp-checkpoint-<step>/` and renamed it at the end.
- DeepSpeed (deepspeed/runtime/engine.py, save_checkpoint): `<tag>/mp_rank_XX_model_states.pt`
  (and ZeRO `zero_pp_rank_*_optim_states.pt`), then the `latest` file holding the tag, default
  `global_step<N>`.
- Megatron-LM / NeMo (megatron/training/checkpointing.py): `iter_<7 digits>/mp_rank_XX*/
  model_optim_rng.pt` (or a torch_dist `.metadata`), then `latest_checkpointed_iteration.txt`
  holding the iteration (or `release`).
- a configured glob (policy `checkpoint_globs`): the newest match.

A candidate whose files are still growing (size or mtime changing over `settle_s`) is skipped.
"""

from __future__ import annotations

import json
import os
import re
import time
import zipfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

_STEP = re.compile(r"(\d+)(?!.*\d)")  # the last number in a name
_TEMP = re.compile(r"^(tmp-|\.)|(\.tmp|\.partial|\.incomplete|~)$")
_MAX_ENTRIES = 20_000  # bound the walk of a huge directory
_MAX_DEPTH = 3


@dataclass(frozen=True)
class Checkpoint:
    """A complete checkpoint: what to resume from, its step when known, and its layout."""

    path: str
    step: int | None
    layout: str  # dcp | lightning | hf | deepspeed | megatron | glob
    mtime: float


def _step_of(name: str) -> int | None:
    m = _STEP.search(name)
    return int(m.group(1)) if m else None


def _is_temp(name: str) -> bool:
    return bool(_TEMP.search(name))


def _walk(root: Path) -> Iterator[Path]:
    """Directories under root (root first), depth- and size-bounded, temp names skipped."""
    seen = 0
    todo: list[tuple[Path, int]] = [(root, 0)]
    while todo:
        d, depth = todo.pop(0)
        yield d
        if depth >= _MAX_DEPTH:
            continue
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError:
            continue
        for e in entries:
            seen += 1
            if seen > _MAX_ENTRIES:
                return
            if e.is_dir(follow_symlinks=False) and not _is_temp(e.name):
                todo.append((Path(e.path), depth + 1))


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _dcp(d: Path) -> Checkpoint | None:
    meta = d / ".metadata"
    if meta.is_file() and meta.stat().st_size > 0 and any(d.glob("*.distcp")):
        return Checkpoint(str(d), _step_of(d.name), "dcp", _mtime(meta))
    return None  # only .metadata.tmp, or no metadata: cut off before finish()


def _torch_zip_complete(path: Path) -> bool:
    try:
        return zipfile.is_zipfile(path)  # torch.save's zip ends with its central directory
    except OSError:
        return False


def _lightning(d: Path) -> list[Checkpoint]:
    out = []
    for f in sorted(d.glob("*.ckpt")):
        if _is_temp(f.name) or not f.is_file():  # a *.ckpt directory is DeepSpeed's layout
            continue
        target = f.resolve() if f.is_symlink() else f
        if not target.is_file() or not _torch_zip_complete(target):
            continue
        step = _step_of(target.name.split("step=")[-1]) if "step=" in target.name else None
        out.append(Checkpoint(str(f), step, "lightning", _mtime(target)))
    return out


def _hf(d: Path) -> Checkpoint | None:
    m = re.fullmatch(r"checkpoint-(\d+)", d.name)
    state = d / "trainer_state.json"
    if m is None or not state.is_file():
        return None
    try:
        doc = json.loads(state.read_text(encoding="utf-8"))
        step = int(doc.get("global_step", m.group(1)))
    except (OSError, ValueError, TypeError):
        return None  # trainer_state.json cut off mid-write
    return Checkpoint(str(d), step, "hf", _mtime(state))


def _read_marker(path: Path) -> str | None:
    try:
        text = path.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return text or None


def _deepspeed(d: Path) -> Checkpoint | None:
    tag = _read_marker(d / "latest")
    if tag is None or "/" in tag or tag in (".", ".."):
        return None
    tag_dir = d / tag
    states = list(tag_dir.glob("*model_states.pt")) if tag_dir.is_dir() else []
    if not states:
        return None
    return Checkpoint(str(tag_dir), _step_of(tag), "deepspeed", max(_mtime(s) for s in states))


def _megatron(d: Path) -> Checkpoint | None:
    text = _read_marker(d / "latest_checkpointed_iteration.txt")
    if text is None:
        return None
    if text == "release":
        it_dir, step = d / "release", None
    elif text.isdigit():
        it_dir, step = d / f"iter_{int(text):07d}", int(text)
    else:
        return None
    files = list(it_dir.glob("mp_rank_*/model_optim_rng.pt")) + list(it_dir.glob(".metadata"))
    if not files:
        return None
    return Checkpoint(str(it_dir), step, "megatron", max(_mtime(f) for f in files))


def _globbed(root: Path, globs: Iterable[str]) -> list[Checkpoint]:
    out = []
    for pattern in globs:
        for p in root.glob(pattern):
            if not _is_temp(p.name):
                out.append(Checkpoint(str(p), _step_of(p.name), "glob", _mtime(p)))
    return out


def candidates(root: Path, *, globs: Iterable[str] = ()) -> list[Checkpoint]:
    """Every complete-looking checkpoint under root, newest first: by step when all have one,
    else by mtime."""
    found: list[Checkpoint] = []
    for d in _walk(root):
        for c in (_dcp(d), _hf(d), _deepspeed(d), _megatron(d)):
            if c is not None:
                found.append(c)
        found += _lightning(d)
    found += _globbed(root, globs)
    # A marker inside another checkpoint (FSDP's DCP dir inside checkpoint-N) is part of it.
    paths = sorted({c.path for c in found}, key=len)
    outer = [c for c in found if not any(c.path.startswith(p + os.sep) for p in paths)]
    if all(c.step is not None for c in outer):
        return sorted(outer, key=lambda c: (c.step or 0, c.mtime), reverse=True)
    return sorted(outer, key=lambda c: c.mtime, reverse=True)  # some unnumbered (last.ckpt)


def _fingerprint(path: Path) -> tuple[int, float]:
    """Total size and newest mtime of a file or directory tree (bounded)."""
    if path.is_file():
        st = path.stat()
        return st.st_size, st.st_mtime
    size, newest, n = 0, 0.0, 0
    for dirpath, _, files in os.walk(path):
        for name in files:
            n += 1
            if n > _MAX_ENTRIES:
                return size, newest
            try:
                st = os.stat(os.path.join(dirpath, name))
            except OSError:
                continue
            size, newest = size + st.st_size, max(newest, st.st_mtime)
    return size, newest


def find_checkpoint(
    root: str | Path,
    *,
    globs: Iterable[str] = (),
    settle_s: float = 0.25,
    quiet_s: float = 30.0,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> Checkpoint | None:
    """The newest complete checkpoint under root, or None.

    A candidate modified within `quiet_s` is measured twice, `settle_s` apart; one still
    growing is skipped for the next one.
    """
    base = Path(root)
    if not base.is_dir():
        return None
    for cand in candidates(base, globs=globs):
        path = Path(cand.path)
        try:
            before = _fingerprint(path)
            if clock() - before[1] < quiet_s:
                sleep(settle_s)
                if _fingerprint(path) != before:
                    continue
        except OSError:
            continue
        return cand
    return None
