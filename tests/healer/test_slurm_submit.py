"""Rebuilding sbatch options from real `scontrol show job` output (Slurm 22.05, recorded), and
the checkpoint directory a job names in its comment or batch script."""

from __future__ import annotations

from pathlib import Path

from collector.slurm.scontrol import parse_scontrol_jobs
from healer.slurm_submit import checkpoint_hints, resubmit_marker, sbatch_args

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"


def job(name: str, job_id: str) -> dict[str, str]:
    jobs, _ = parse_scontrol_jobs((FIXTURES / name).read_text())
    return next(j for j in jobs if j.job_id == job_id).fields


def test_a_pinned_multinode_job_keeps_its_shape_and_loses_only_the_bad_node() -> None:
    fields = job("scontrol_show_job_d_multinode.txt", "3")  # ReqNodeList=node[1,3], 2x gpu:2
    marker = resubmit_marker("fmtest", "3", 17)
    args = sbatch_args(
        fields,
        job_id="3",
        exclude=["node1"],
        env={"WANDB_RUN_ID": "abc"},
        marker=marker,
        as_root=True,
    )
    assert args[0] == "--parsable"
    for expected in (
        "--job-name=multi2",
        "--partition=debug",
        "--account=root",
        "--qos=normal",
        "--chdir=/tmp/fm-slurm-dev/jobs",
        "--time=365-00:00:00",
        "--output=/tmp/fm-slurm-dev/jobs/multi2-%j.out",
        "--error=/tmp/fm-slurm-dev/jobs/multi2-%j.out",
        f"--comment={marker}",
        "--requeue",
        "--nodes=2",
        "--ntasks=2",
        "--gres=gpu:2",
        "--nodelist=node3",
        "--exclude=node1",
        "--export=ALL,WANDB_RUN_ID=abc",
    ):
        assert expected in args, expected
    assert not any(a.startswith(("--uid", "--mem", "--constraint", "--input")) for a in args)


def test_resume_environment_goes_in_export_and_a_user_comment_is_kept() -> None:
    fields = dict(job("scontrol_show_job_d_running.txt", "1"))
    fields["Comment"] = "checkpoint_dir=/ckpt/run7 fleetmedic-resubmit:old:1:2"
    fields["UserId"], fields["GroupId"] = "alice(1001)", "ml(2001)"
    env = {
        "FLEETMEDIC_RESUME_FROM": "/ckpt/run7/checkpoint-30",
        "WANDB_RUN_ID": "r1",
        "WANDB_RESUME": "allow",
        "BAD": "a,b",
    }
    args = sbatch_args(fields, job_id="1", exclude=["node1"], env=env, marker="M", as_root=True)
    assert (
        "--export=ALL,FLEETMEDIC_RESUME_FROM=/ckpt/run7/checkpoint-30,WANDB_RUN_ID=r1,"
        "WANDB_RESUME=allow"
    ) in args
    assert "--comment=checkpoint_dir=/ckpt/run7 M" in args  # our old marker replaced
    assert "--uid=alice" in args and "--gid=ml" in args  # never runs a user's job as root
    assert "--exclude=node1" in args and "--gres=gpu:2" in args


def test_only_the_log_file_name_gets_the_new_job_id_never_a_directory() -> None:
    fields = dict(job("scontrol_show_job_d_running.txt", "1"))
    fields["StdOut"] = "/scratch/run2/e2e-2/train-2.out"
    fields["StdErr"] = "/scratch/run2/logs/errors.txt"  # no id in the name: kept as it is
    args = sbatch_args(fields, job_id="2", exclude=[], env={}, marker="M", as_root=False)
    assert "--output=/scratch/run2/e2e-2/train-%j.out" in args
    assert "--error=/scratch/run2/logs/errors.txt" in args


def test_checkpoint_dir_from_comment_then_script_literal_paths_only() -> None:
    script = (
        "#!/bin/bash\n#SBATCH --time=10\n"
        "export FLEETMEDIC_CHECKPOINT_DIR=/shared/ckpt/llama  # where train.py saves\n"
        "CHECKPOINT_DIR=$HOME/ckpt\n"
        "python train.py\n"
    )
    hints = checkpoint_hints("run=7 checkpoint_dir=/scratch/run7", script)
    assert hints == [("comment", "/scratch/run7"), ("batch_script", "/shared/ckpt/llama")]
    assert checkpoint_hints(None, "export FLEETMEDIC_CHECKPOINT_DIR=$SCRATCH/x\n") == []
