"""SQLAlchemy Core tables of the timeline. Alembic migrations create them; nothing else does."""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    JSON,
    REAL,
    BigInteger,
    Boolean,
    Column,
    Float,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
)

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

# BIGINT ids autoincrement on PostgreSQL; SQLite only autoincrements INTEGER PRIMARY KEY.
BigId = BigInteger().with_variant(Integer(), "sqlite")

ingest_batches = Table(
    "ingest_batches",
    metadata,
    Column("batch_id", String(64), primary_key=True),
    Column("agent", String(255), nullable=False),
    Column("node", String(255), nullable=False),
    Column("received_ts", Float, nullable=False),
    Column("samples", Integer, nullable=False, default=0),
    Column("events", Integer, nullable=False, default=0),
    # sha256 of the body's canonical JSON: a reused batch_id with other content is refused.
    Column("digest", String(64)),  # NULL for batches stored before revision 0004
)

# One row per server process, rewritten by every /readyz: the probe is a real write.
server_heartbeats = Table(
    "server_heartbeats",
    metadata,
    Column("server", String(255), primary_key=True),  # host:pid
    Column("ts", Float, nullable=False),
)

nodes = Table(
    "nodes",
    metadata,
    Column("name", String(255), primary_key=True),
    Column("scheduler", String(16)),
    Column("cluster", String(64), nullable=False, default="default"),
    Column("state", String(64)),
    Column("reason", String(1024)),
    Column("reason_user", String(128)),
    Column("reason_ts", Float),
    Column("unschedulable", Boolean),
    Column("gpu_count", Integer),
    Column("gpu_allocatable", Integer),
    Column("labels", JSON, nullable=False, default=dict),
    Column("taints", JSON, nullable=False, default=list),
    Column("updated_ts", Float),
    Column("last_seen_ts", Float),  # last time any agent batch came from this node
)

gpus = Table(
    "gpus",
    metadata,
    Column("uuid", String(96), primary_key=True),
    Column("node", String(255), nullable=False, index=True),
    Column("index", Integer),
    Column("pci_bus_id", String(32)),
    # Indexed (revision 0014): the fleet's filter lists the few models by skipping through it.
    Column("name", String(128), index=True),
    Column("serial", String(64)),
    Column("memory_total_mb", Float),
    Column("mig_mode", Boolean),
    Column("driver_version", String(32)),
    Column("updated_ts", Float),
    # The GPU's id in gpu_ids (revision 0012): the fleet joins its newest sample on it.
    Column("gpu_id", Integer),
)

SAMPLE_FIELDS = (
    "util_gpu",
    "util_mem",
    "mem_used_mb",
    "mem_total_mb",
    "power_w",
    "temp_gpu",
    "temp_mem",
    "sm_clock_mhz",
    "clock_event_reasons",
    "ecc_sbe_volatile",
    "ecc_dbe_volatile",
    "ecc_sbe_aggregate",
    "ecc_dbe_aggregate",
    "remapped_correctable",
    "remapped_uncorrectable",
    "remap_pending",
    "remap_failure",
    "retired_pages_sbe",
    "retired_pages_dbe",
    "pcie_replay",
    "nvlink_crc_errors",
    "nvlink_replay_errors",
    "nvlink_recovery_errors",
    "energy_mj",
    "extra",
)

# 4-byte floats for gauges: NVML reports them as integers or to a tenth at most, well within a
# float's 24-bit mantissa. energy_mj is a lifetime counter in millijoules: it needs a double.
GAUGE_FIELDS = (
    "util_gpu",
    "util_mem",
    "mem_used_mb",
    "mem_total_mb",
    "power_w",
    "temp_gpu",
    "temp_mem",
    "sm_clock_mhz",
)
_COUNTER_TYPES: dict[str, Any] = {
    "clock_event_reasons": BigInteger,
    "ecc_sbe_volatile": BigInteger,
    "ecc_dbe_volatile": BigInteger,
    "ecc_sbe_aggregate": BigInteger,
    "ecc_dbe_aggregate": BigInteger,
    "remapped_correctable": Integer,
    "remapped_uncorrectable": Integer,
    "remap_pending": Boolean,
    "remap_failure": Boolean,
    "retired_pages_sbe": Integer,
    "retired_pages_dbe": Integer,
    "pcie_replay": BigInteger,
    "nvlink_crc_errors": BigInteger,
    "nvlink_replay_errors": BigInteger,
    "nvlink_recovery_errors": BigInteger,
    "energy_mj": Float,
    "extra": JSON,
}


def _sample_columns() -> list[Column[Any]]:
    """The value columns of one wide sample (every field of SAMPLE_FIELDS)."""
    cols: list[Column[Any]] = [Column(f, REAL) for f in GAUGE_FIELDS]
    return cols + [Column(f, kind) for f, kind in _COUNTER_TYPES.items()]


# A GPU's uuid and node once; samples name the GPU by this small integer.
gpu_ids = Table(
    "gpu_ids",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("uuid", String(96), nullable=False, unique=True),
    Column("node", String(255), nullable=False),
)

# Compact rows keyed by (integer milliseconds, GPU id): time first, so ingest appends at the
# end of one B-tree (keyed by GPU first, a batch of 1,000 GPUs dirtied ~1,000 pages: measured
# 3x slower on SQLite) and expiry cuts off its start. SQLite keeps them WITHOUT ROWID (the key
# is the table, no second B-tree); PostgreSQL partitions them by day (timeline.partitions).
samples = Table(
    "samples",
    metadata,
    Column("gpu_id", Integer, nullable=False, autoincrement=False),
    Column("ts_ms", BigInteger, nullable=False, autoincrement=False),
    *_sample_columns(),
    PrimaryKeyConstraint("ts_ms", "gpu_id"),
    # One GPU's rows in a range (node and job pages): an index of small entries, ~4 ms more per
    # 1,000-sample batch on SQLite (measured); without it such a read scanned every GPU's rows.
    Index("ix_samples_gpu_id_ts_ms", "gpu_id", "ts_ms"),
    sqlite_with_rowid=False,
    postgresql_partition_by="RANGE (ts_ms)",
)

# SQLite only (empty on PostgreSQL): new samples land here first, keyed like `samples` but with
# no (gpu_id, ts_ms) index, so a batch dirties a few pages at the end of one B-tree instead of
# one index leaf per GPU. timeline.samples_stage moves them into `samples` in bulk (each GPU's
# index leaf then takes many samples at once); readers read both tables.
samples_staged = Table(
    "samples_staged",
    metadata,
    Column("gpu_id", Integer, nullable=False, autoincrement=False),
    Column("ts_ms", BigInteger, nullable=False, autoincrement=False),
    *_sample_columns(),
    PrimaryKeyConstraint("ts_ms", "gpu_id"),
    sqlite_with_rowid=False,
)

# The newest sample of each GPU, rewritten on ingest: "latest per GPU" never reads history.
gpu_latest = Table(
    "gpu_latest",
    metadata,
    Column("gpu_id", Integer, primary_key=True, autoincrement=False),
    Column("ts_ms", BigInteger, nullable=False),
    *_sample_columns(),
)

# Rollups of samples per GPU and minute / hour: count, first and last sample time, and per
# gauge its min, max, mean, newest value and how many samples carried it (means merge by it).
ROLLUP_STATS = ("min", "max", "mean", "last")


def _rollup(name: str) -> Table:
    cols: list[Column[Any]] = []
    for f in GAUGE_FIELDS:
        cols += [Column(f"{f}_{stat}", REAL) for stat in ROLLUP_STATS]
        cols.append(Column(f"{f}_n", Integer, nullable=False))
    return Table(
        name,
        metadata,
        Column("bucket_ms", BigInteger, nullable=False, autoincrement=False),
        Column("gpu_id", Integer, nullable=False, autoincrement=False),
        Column("count", Integer, nullable=False),
        Column("first_ts_ms", BigInteger, nullable=False),
        Column("last_ts_ms", BigInteger, nullable=False),
        *cols,
        PrimaryKeyConstraint("bucket_ms", "gpu_id"),
        # Per-GPU reads over weeks: the page of one GPU, not the whole fleet's buckets.
        Index(f"ix_{name}_gpu_id_bucket_ms", "gpu_id", "bucket_ms"),
        sqlite_with_rowid=False,
    )


samples_1m = _rollup("samples_1m")
samples_1h = _rollup("samples_1h")

# How far each rollup is complete: the job resumes there (and redoes a short overlap).
rollup_marks = Table(
    "rollup_marks",
    metadata,
    Column("level", String(16), primary_key=True),
    Column("done_until_ms", BigInteger, nullable=False),
)

events = Table(
    "events",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("ts", Float, nullable=False),
    Column("received_ts", Float, nullable=False),
    Column("node", String(255)),
    Column("source", String(32), nullable=False),
    Column("kind", String(32), nullable=False),
    Column("gpu_uuid", String(96)),
    Column("pci_bus_id", String(32)),
    Column("job_id", String(128)),
    Column("code", Integer),
    Column("severity", String(16), nullable=False),
    Column("message", Text, nullable=False, default=""),
    Column("raw", Text),
    Column("payload", JSON, nullable=False, default=dict),
    Column("count", Integer, nullable=False, default=1),
    Column("dedup_key", String(255)),
    Column("batch_id", String(64)),
    UniqueConstraint("source", "dedup_key", name="uq_events_source_dedup_key"),
    Index("ix_events_ts", "ts"),
    Index("ix_events_node_ts", "node", "ts"),
    Index("ix_events_kind_ts", "kind", "ts"),
    Index("ix_events_received_ts", "received_ts"),
)

jobs = Table(
    "jobs",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("scheduler", String(16), nullable=False),
    Column("cluster", String(64), nullable=False, default="default"),
    Column("job_id", String(128), nullable=False),
    Column("name", String(255)),
    Column("user", String(128)),
    Column("account", String(128)),
    Column("partition", String(128)),
    Column("state", String(32), nullable=False),
    Column("reason", String(255)),
    Column("submit_ts", Float),
    Column("start_ts", Float),
    Column("end_ts", Float),
    Column("exit_code", Integer),
    Column("signal", Integer),
    Column("nodes", JSON, nullable=False, default=list),
    Column("gpus", Integer),
    Column("checkpoint_dir", String(1024)),
    Column("wandb_run", String(255)),
    Column("requeue_of", String(128)),
    Column("restart_count", Integer, nullable=False, default=0),
    Column("payload", JSON, nullable=False, default=dict),
    Column("updated_ts", Float, nullable=False),
    UniqueConstraint("scheduler", "cluster", "job_id", name="uq_jobs_scheduler_cluster_job_id"),
    Index("ix_jobs_state", "state"),
    Index("ix_jobs_end_ts", "end_ts"),
    # Allocations and events name a job by (job_id, scheduler) without the cluster.
    Index("ix_jobs_job_id_scheduler", "job_id", "scheduler"),
)

allocations = Table(
    "allocations",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("scheduler", String(16), nullable=False),
    Column("job_id", String(128), nullable=False),
    Column("node", String(255), nullable=False),
    # -1 means "the whole node" so the unique key works on both backends (NULLs never collide).
    Column("gpu_index", Integer, nullable=False, default=-1),
    Column("gpu_uuid", String(96)),
    Column("start_ts", Float, nullable=False),
    Column("end_ts", Float),
    UniqueConstraint(
        "scheduler", "job_id", "node", "gpu_index", name="uq_allocations_job_node_gpu"
    ),
    Index("ix_allocations_node_span", "node", "start_ts", "end_ts"),
    Index("ix_allocations_gpu_uuid", "gpu_uuid"),
    Index("ix_allocations_end_ts", "end_ts"),  # open allocations: end_ts IS NULL
)

# One row per lease (today: "leader"). Times are the database's clock, so replicas on hosts
# whose clocks differ agree on expiry. The epoch grows whenever the lease changes hands.
leases = Table(
    "leases",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("holder", String(255), nullable=False),
    Column("epoch", BigInteger, nullable=False),
    Column("acquired_ts", Float, nullable=False),  # when the current term began
    Column("expires_ts", Float, nullable=False),
)

__all__ = [
    "GAUGE_FIELDS",
    "SAMPLE_FIELDS",
    "allocations",
    "events",
    "gpu_ids",
    "gpu_latest",
    "gpus",
    "ingest_batches",
    "jobs",
    "leases",
    "metadata",
    "nodes",
    "rollup_marks",
    "samples",
    "samples_1h",
    "samples_1m",
    "samples_staged",
    "server_heartbeats",
]
