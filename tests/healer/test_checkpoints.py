"""Checkpoint discovery on directories laid out as each library writes them, with the
incomplete ones each library can leave behind (cut off before its last marker)."""

from __future__ import annotations

import io
import json
import os
import pickle
import time
import zipfile
from pathlib import Path

from healer.checkpoints import candidates, find_checkpoint


def old(path: Path, age_s: float = 120.0) -> None:
    """Backdate a tree so it counts as settled (not written in the last seconds)."""
    t = time.time() - age_s
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            os.utime(os.path.join(root, name), (t, t), follow_symlinks=False)
    os.utime(path, (t, t))


def torch_zip(stem: str) -> bytes:
    """A torch.save archive: members under '<stem>/' as torch's zip writer names them."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(f"{stem}/data.pkl", pickle.dumps({"global_step": 100, "state_dict": {}}))
        z.writestr(f"{stem}/byteorder", "little")
        z.writestr(f"{stem}/data/0", b"\0" * 64)
        z.writestr(f"{stem}/version", "3\n")
        z.writestr(f"{stem}/.data/serialization_id", "0123456789")
    return buf.getvalue()


def test_dcp_needs_its_metadata_file_renamed_into_place(tmp_path: Path) -> None:
    for step, done in ((200, True), (300, False)):
        d = tmp_path / f"step_{step}"
        d.mkdir()
        (d / "__0_0.distcp").write_bytes(b"x" * 100)
        (d / "__1_0.distcp").write_bytes(b"y" * 100)
        name = ".metadata" if done else ".metadata.tmp"  # finish() renames .tmp last
        (d / name).write_bytes(pickle.dumps({"planner": "default"}))
    old(tmp_path)
    found = find_checkpoint(tmp_path)
    assert found is not None and (found.layout, found.step) == ("dcp", 200)


def test_lightning_ckpt_must_be_a_whole_torch_zip_and_last_ckpt_may_be_a_link(
    tmp_path: Path,
) -> None:
    ckpts = tmp_path / "lightning_logs" / "version_0" / "checkpoints"
    ckpts.mkdir(parents=True)
    (ckpts / "epoch=0-step=100.ckpt").write_bytes(torch_zip("epoch=0-step=100"))
    whole = torch_zip("epoch=1-step=200")
    (ckpts / "epoch=1-step=200.ckpt").write_bytes(whole[: len(whole) // 2])  # cut mid-write
    (ckpts / "last.ckpt").symlink_to("epoch=0-step=100.ckpt")
    old(tmp_path)
    found = find_checkpoint(tmp_path)
    assert found is not None and found.layout == "lightning"
    assert Path(found.path).resolve().name == "epoch=0-step=100.ckpt"


def test_hf_trainer_checkpoint_needs_trainer_state_and_skips_staging_dirs(tmp_path: Path) -> None:
    def checkpoint(name: str, step: int, state: str | None) -> None:
        d = tmp_path / name
        d.mkdir()
        for f in (
            "config.json",
            "model.safetensors",
            "optimizer.pt",
            "scheduler.pt",
            "rng_state.pth",
            "training_args.bin",
        ):
            (d / f).write_bytes(b"0" * 32)
        if state is not None:
            (d / "trainer_state.json").write_text(state)

    checkpoint("checkpoint-500", 500, json.dumps({"global_step": 500, "epoch": 1.0}))
    checkpoint("checkpoint-1000", 1000, None)  # killed before trainer_state.json
    checkpoint("checkpoint-1250", 1250, '{"global_step": 12')  # cut mid-write
    checkpoint("tmp-checkpoint-1500", 1500, json.dumps({"global_step": 1500}))  # 4.36 staging
    old(tmp_path)
    found = find_checkpoint(tmp_path)
    assert found is not None and (found.layout, found.step) == ("hf", 500)
    assert found.path == str(tmp_path / "checkpoint-500")


def test_deepspeed_follows_the_latest_file_not_newer_unfinished_tags(tmp_path: Path) -> None:
    for step in (40, 50):
        d = tmp_path / f"global_step{step}"
        d.mkdir()
        (d / "mp_rank_00_model_states.pt").write_bytes(b"m" * 64)
        (d / "zero_pp_rank_0_mp_rank_00_optim_states.pt").write_bytes(b"o" * 64)
    (tmp_path / "latest").write_text("global_step40")  # written after the save completes
    old(tmp_path)
    found = find_checkpoint(tmp_path)
    assert found is not None and (found.layout, found.step) == ("deepspeed", 40)
    assert found.path == str(tmp_path / "global_step40")


def test_megatron_follows_its_tracker_file(tmp_path: Path) -> None:
    for it in (2000, 3000):
        d = tmp_path / f"iter_{it:07d}" / "mp_rank_00"
        d.mkdir(parents=True)
        (d / "model_optim_rng.pt").write_bytes(b"w" * 64)
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("2000")
    old(tmp_path)
    found = find_checkpoint(tmp_path)
    assert found is not None and (found.layout, found.step) == ("megatron", 2000)
    assert found.path == str(tmp_path / "iter_0002000")


def test_a_configured_glob_finds_plain_files(tmp_path: Path) -> None:
    for step in (10, 20):
        (tmp_path / f"ckpt_{step:05d}.pt").write_bytes(b"c" * 10)
    (tmp_path / "ckpt_00030.pt.tmp").write_bytes(b"c" * 3)
    old(tmp_path)
    assert find_checkpoint(tmp_path) is None  # no library layout and no glob: nothing
    found = find_checkpoint(tmp_path, globs=["ckpt_*.pt"])
    assert found is not None and (found.layout, found.step) == ("glob", 20)


def test_a_checkpoint_still_growing_is_skipped_for_the_previous_one(tmp_path: Path) -> None:
    for step in (100, 200):
        d = tmp_path / f"checkpoint-{step}"
        d.mkdir()
        (d / "trainer_state.json").write_text(json.dumps({"global_step": step}))
        (d / "model.safetensors").write_bytes(b"0" * 100)
    old(tmp_path / "checkpoint-100")
    growing = tmp_path / "checkpoint-200" / "model.safetensors"

    def sleep(_: float) -> None:  # the writer appends while we wait
        with growing.open("ab") as f:
            f.write(b"1" * 100)

    found = find_checkpoint(tmp_path, sleep=sleep)
    assert found is not None and found.step == 100


def test_missing_or_empty_directory_has_no_checkpoint(tmp_path: Path) -> None:
    assert find_checkpoint(tmp_path / "nope") is None
    assert find_checkpoint(tmp_path) is None
    assert candidates(tmp_path) == []
