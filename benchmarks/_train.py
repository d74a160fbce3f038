"""A training job for the healer's end-to-end tests and the recovery benchmark.

It checkpoints the way Hugging Face's Trainer does (transformers 4.36's _save_checkpoint: the
files go to `tmp-checkpoint-<step>/`, `trainer_state.json` last, then a rename to
`checkpoint-<step>/`), logs every step to a real W&B run (offline), and on start resumes from
`$FLEETMEDIC_RESUME_FROM` when set (a resubmission), else from its own newest complete
checkpoint (a Slurm requeue reruns the same script with the same environment). The W&B run id
comes from `$WANDB_RUN_ID` (wandb reads it itself), else from the checkpoint it resumes.

Run by Slurm: `python _train.py --ckpt-dir DIR [--save-every N] [--step-s S] [--config-dir 0|1]
[--no-wandb]`.
It prints `resumed from step S at PATH` or `starting fresh`, `wandb run ID`, then `step N` per
step: the tests and the benchmark read these lines from the job's output.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any


def newest_complete(ckpt_dir: Path) -> Path | None:
    """The script's own resume logic (like Trainer's get_last_checkpoint plus a marker check)."""
    best: tuple[int, Path] | None = None
    for d in ckpt_dir.glob("checkpoint-*"):
        state = d / "trainer_state.json"
        if d.name.split("-")[-1].isdigit() and state.is_file():
            step = int(d.name.split("-")[-1])
            best = max(best or (step, d), (step, d))
    return None if best is None else best[1]


def save(ckpt_dir: Path, step: int, run_id: str | None) -> None:
    """Files first, trainer_state.json last, then the rename: as transformers 4.36 does."""
    tmp = ckpt_dir / f"tmp-checkpoint-{step}"
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "model.safetensors").write_bytes(os.urandom(4096))
    (tmp / "optimizer.pt").write_bytes(os.urandom(8192))
    state = {"global_step": step, "epoch": step / 1000, "wandb_run_id": run_id}
    (tmp / "trainer_state.json").write_text(json.dumps(state))
    os.replace(tmp, ckpt_dir / f"checkpoint-{step}")


def main() -> None:
    """Train (sleep) forever, checkpointing and logging each step."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--ckpt-dir", default=os.environ.get("FLEETMEDIC_CHECKPOINT_DIR"))
    parser.add_argument("--save-every", type=int, default=5)
    parser.add_argument("--step-s", type=float, default=0.2)
    parser.add_argument("--no-wandb", action="store_true")
    # Whether the W&B run's config names the checkpoint directory (the healer's second source).
    parser.add_argument("--config-dir", type=int, default=1)
    args = parser.parse_args()
    ckpt_dir = Path(args.ckpt_dir)
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    given = os.environ.get("FLEETMEDIC_RESUME_FROM")
    resume = Path(given) if given else newest_complete(ckpt_dir)
    start, run_id = 0, os.environ.get("WANDB_RUN_ID")
    if resume is not None:
        state = json.loads((resume / "trainer_state.json").read_text())
        start, run_id = int(state["global_step"]), run_id or state.get("wandb_run_id")
        print(f"resumed from step {start} at {resume}", flush=True)
    else:
        print("starting fresh", flush=True)
    where = os.environ.get("SLURMD_NODENAME"), os.environ.get("SLURM_RESTART_COUNT", "0")
    print(f"node {where[0]} restart {where[1]}", flush=True)
    run: Any = None
    if not args.no_wandb:
        import wandb

        config = {"checkpoint_dir": str(ckpt_dir)} if args.config_dir else {}
        run = wandb.init(project="fmtest", id=run_id, resume="allow", config=config)
        run_id = run.id
    print(f"wandb run {run_id}", flush=True)
    step = start
    while True:
        step += 1
        time.sleep(args.step_s)
        if run is not None:
            # Per-layer gradient norms, as training scripts log them (W&B writes its run file
            # in 32 KiB blocks; this much per step puts the run on disk within seconds).
            run.log(
                {"loss": 1.0 / step, "grad_norms": [1.0 / (step + i) for i in range(256)]},
                step=step,
            )
        print(f"step {step}", flush=True)
        if step % args.save_every == 0:
            save(ckpt_dir, step, run_id)


if __name__ == "__main__":
    main()
