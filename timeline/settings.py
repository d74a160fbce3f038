"""Settings for every fleetmedic process: environment (FLEETMEDIC_*) and an optional TOML file."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any, Literal

import platformdirs
from pydantic import Field, SecretStr, field_validator
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)


def default_data_dir() -> Path:
    """The per-user directory where the embedded database and spools live."""
    return Path(platformdirs.user_data_dir("fleetmedic", appauthor=False))


def default_database_url() -> str:
    """An SQLite file in the per-user data directory."""
    return f"sqlite:///{default_data_dir() / 'fleetmedic.db'}"


def _split_list(value: Any) -> Any:
    """Environment lists: a JSON array, or comma-separated items."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            return json.loads(text)
        return [t.strip() for t in text.split(",") if t.strip()]
    return value


def _split_tokens(value: Any) -> Any:
    """Token lists split like other lists, but one that is set and holds no token is an error.

    `FLEETMEDIC_API_TOKENS=" , "` must not leave reads open by accident: fail closed, loudly.
    """
    items = _split_list(value)
    given = value.strip() if isinstance(value, str) else value
    if given and not [i for i in items if str(i).strip()]:
        raise ValueError("is set but holds no token; unset it, or give at least one token")
    return [i.strip() if isinstance(i, str) else i for i in items if str(i).strip()]


class Settings(BaseSettings):
    """Configuration; every field can be set as FLEETMEDIC_<NAME> or in the TOML config file."""

    model_config = SettingsConfigDict(env_prefix="FLEETMEDIC_", extra="ignore")

    database_url: str = Field(default_factory=default_database_url)
    host: str = "127.0.0.1"
    port: int = 8080
    workers: int = 1  # server processes; one of them (the leader) runs sources and correlator
    # Agents authenticate ingest with one of these: TOKEN, or TOKEN@NODE_GLOB to bind it to nodes.
    agent_tokens: Annotated[list[SecretStr], NoDecode] = Field(default_factory=list)
    # People and tools: [ROLE:[NAME:]]TOKEN, ROLE viewer (default) or admin. When none is set,
    # reads are open; admin work (approve, reject, reset) always needs an admin token.
    api_tokens: Annotated[list[SecretStr], NoDecode] = Field(default_factory=list)
    session_secret: SecretStr | None = None  # signs page-login cookies; default: from the tokens
    session_max_age_s: int = 12 * 3600  # a page login lasts this long
    session_https_only: bool = False  # mark the session cookie Secure (set behind HTTPS)
    max_body_bytes: int = 16 * 1024 * 1024
    max_batch_items: int = 50_000
    log_level: str = "INFO"
    data_dir: Path = Field(default_factory=default_data_dir)
    page_refresh_s: int = 10
    idle_util_threshold: float = 5.0  # percent; allocated GPUs at or below this count as idle

    # --- leader (replicas across hosts: one lease row in the store) ---
    leader_lease_s: float = 15.0  # a leader that stops renewing is replaced after this long
    leader_renew_s: float = 2.0  # how often the leader renews and the others try to take over

    # --- hardening (the input boundary, slow clients, errors, logging) ---
    # GPUs, jobs, allocations, nodes and job patches of one ingest batch (each GPU, job,
    # allocation or node is its own statement: 5,000 jobs held the SQLite writer 17 s).
    max_batch_records: int = 2000
    # Agents' sample-only batches that queue while a transaction runs are stored together in
    # the next one (timeline.group_commit); off, each batch is its own transaction.
    ingest_group_commit: bool = True
    ingest_max_age_s: float = 30 * 86400.0  # samples/events older than this are refused
    ingest_max_ahead_s: float = 3600.0  # any time this far past the server's clock is refused
    api_max_response_bytes: int = 4 * 1024 * 1024  # list reads stop here (X-Truncated header)
    database_busy_timeout_s: float = 10.0  # wait this long on a locked database, then 503
    metrics_public: bool = True  # /metrics without a token (else a viewer token or login)
    docs_public: bool = True  # /docs and /openapi.json without a token (else a viewer)
    header_timeout_s: float = 10.0  # a request's headers must arrive within this
    body_timeout_s: float = 60.0  # ...and its body within this after the headers
    keepalive_timeout_s: float = 5.0  # an idle kept-alive connection is closed after this
    max_connections: int = 2048  # open connections per server process; past it: 503
    max_connections_per_source: int = 256  # open connections from one client address
    shutdown_timeout_s: float = 10.0  # SIGTERM: in-flight requests get this long, then cut
    log_format: Literal["text", "json"] = "text"  # json: one JSON object per line
    agent_bisect_after: int = 5  # server errors on one batch before the agent bisects it

    # --- telemetry retention and rollups (SQL sample store; leader jobs) ---
    samples_raw_retention_days: float = 7.0  # raw samples kept this long
    samples_1m_retention_days: float = 90.0  # 1-minute rollups kept this long
    samples_1h_retention_days: float = 365.0  # 1-hour rollups kept this long
    samples_rollup_interval_s: float = 60.0  # how often the rollup job runs
    samples_retention_interval_s: float = 600.0  # how often expired telemetry is deleted
    samples_partitions_ahead_days: int = 3  # PostgreSQL: day partitions made this far ahead
    samples_rollup_read_after_s: float = 3600.0  # longer ranges read 1-minute rollups
    samples_hourly_read_after_s: float = 7 * 86400.0  # ...and longer still, 1-hour rollups

    # --- agent (node-side sources) ---
    agent_server_url: str = "http://127.0.0.1:8080"
    agent_token: SecretStr | None = None  # FLEETMEDIC_AGENT_TOKEN; never logged
    agent_node: str | None = None  # default: this host's name
    agent_interval_s: float = 10.0  # hot NVML fields
    agent_slow_every: int = 6  # slow NVML fields every N intervals
    agent_spool_path: Path | None = None  # default: <data_dir>/agent-spool.db
    agent_spool_max_rows: int = 1_000_000
    agent_spool_max_bytes: int = 512 * 1024 * 1024
    agent_batch_max_items: int = 5000
    agent_flush_interval_s: float = 2.0
    agent_proc_root: str = "/proc"
    agent_kmsg_path: str = "/dev/kmsg"
    agent_kmsg_fallback_file: str | None = None  # e.g. /var/log/kern.log, when kmsg is unreadable
    agent_kmsg_poll_s: float = 0.1  # how often the kernel log is read (an Xid goes out at once)
    agent_dcgm_url: str = "http://127.0.0.1:9400/metrics"  # dcgm-exporter's default listener
    agent_dcgm_interval_s: float = 15.0  # dcgm-exporter collects every 30 s by default
    agent_joblog_poll_s: float = 2.0  # how often followed job logs are read
    agent_slurm_bin_dir: str | None = None  # where scontrol lives when it is not on PATH

    # --- slurm (cluster source in the server) ---
    slurm_enabled: bool = False
    slurm_cluster: str = "default"  # the name jobs and nodes are stored under
    slurm_poll_s: float = 30.0
    slurm_lookback_s: float = 3600.0  # first sacct window after a (re)start
    slurm_overlap_s: float = 300.0  # re-read this much of the last window: late accounting
    slurm_command_timeout_s: float = 20.0
    slurm_bin_dir: str | None = None  # where sacct/scontrol live when not on PATH
    slurm_conf: str | None = None  # SLURM_CONF for the commands, when not the default

    # --- kubernetes (cluster source in the server) ---
    kubernetes_enabled: bool = False
    kubernetes_host: str | None = None  # API server URL; unset: in-cluster config, then kubeconfig
    kubernetes_token: SecretStr | None = None  # bearer token (a ServiceAccount token)
    kubernetes_ca_file: str | None = None
    kubernetes_kubeconfig: str | None = None  # when no host: this file, else $KUBECONFIG/~/.kube
    kubernetes_verify_ssl: bool = True
    kubernetes_cluster: str = "default"  # the `cluster` written on jobs and nodes
    kubernetes_gpu_resource: str = "nvidia.com/gpu"
    kubernetes_user_keys: Annotated[list[str], NoDecode] = [
        "fleetmedic.io/user",
        "user",
    ]  # annotation/label keys
    kubernetes_gpu_pods_only: bool = True  # pods that request no GPU are not jobs here
    kubernetes_watch_timeout_s: int = 300  # server-side watch timeout; then re-watch
    kubernetes_backoff_max_s: float = 60.0  # longest wait between retries while the API is down

    # --- wandb ---
    wandb_enabled: bool = False
    wandb_dirs: Annotated[
        list[Path], NoDecode
    ] = []  # folders holding wandb run dirs (run-*/, offline-run-*/)
    wandb_projects: Annotated[
        list[str], NoDecode
    ] = []  # "entity/project" read through the public API when online
    wandb_api_key: SecretStr | None = None
    wandb_stall_minutes: float = 30.0  # a running job with no logged step this long: stalled
    wandb_interval_s: float = 60.0  # how often the server polls run dirs / the API

    # --- correlator ---
    correlator_enabled: bool = True  # the server turns events into incidents
    correlator_interval_s: float = 0.25  # how often the server runs correlate_once (~1 ms idle)
    correlator_max_events: int = 50_000  # events read per pass (bounded memory)
    # A hang or idle check whose reads took d s is next due no sooner than d / this later.
    correlator_max_share: float = Field(default=0.25, gt=0.0, le=1.0)
    # After a pass that ran a hang or idle check, hand the heap its large reads freed back to
    # the OS (glibc malloc_trim): up to 417 MB a pass at 100k GPUs; the RSS still climbs slowly.
    correlator_trim_heap: bool = True
    # Run the passes in a child process the leader replaces once its RSS after a pass is over
    # correlator_process_max_rss_mb: large reads fragment CPython's heap, and only a process's
    # exit gives that memory back (web/correlator_process.py). In-process on in-memory SQLite.
    correlator_process: bool = True
    correlator_process_max_rss_mb: float = Field(default=600.0, gt=0.0)
    correlator_process_timeout_s: float = Field(default=600.0, gt=0.0)  # a pass longer: killed
    correlator_failure_window_s: float = 300.0  # a failed job's root cause: events this long before
    correlator_failure_after_s: float = 60.0  # ...or this long after its end (late logs)
    correlator_nccl_lookback_s: float = 900.0  # NCCL watchdog waits 600 s before it times out
    correlator_first_fail_margin_s: float = 5.0  # "first rank to fail" must lead by this much
    correlator_dedup_window_s: float = 3600.0  # same fingerprint within this: same incident
    correlator_quiet_s: float = 1800.0  # no new evidence this long (and node healthy): resolved
    correlator_stale_s: float = 86400.0  # resolved after this long without evidence, regardless
    correlator_resolve_s: float = 5.0  # how often open incidents are checked for clearing
    correlator_busy_util: float = 20.0  # percent: a GPU above this after an incident works again
    correlator_settle_s: float = 10.0  # id gaps (uncommitted PostgreSQL inserts) re-read this long
    correlator_evidence_cap: int = 50  # event ids kept per incident list
    correlator_repeat_fault_users: int = 2  # user-code Xids from this many users: the GPU's fault
    correlator_repeat_fault_window_s: float = 7 * 86400.0  # ...within this long
    hang_interval_s: float = 10.0
    hang_min_duration_s: float = 45.0  # spin this long before "collective hang suspected"
    hang_util_min: float = 90.0  # percent utilization that counts as "busy"
    hang_power_fraction: float = 0.25  # spin: power below idle + this share of (limit - idle)
    hang_default_power_limit_w: float = 700.0  # when neither the GPU nor its model name tells
    hang_max_sample_gap_s: float = 30.0  # a longer gap in telemetry breaks a spin streak
    hang_profile_interval_s: float = 300.0  # every held GPU's power profile learns this often
    idle_interval_s: float = 60.0
    idle_min_duration_s: float = 1800.0  # allocated and idle this long: an idle finding
    idle_cost_per_gpu_hour: float = 2.0  # dollars, for the waste estimate

    # --- healer ---
    healer_enabled: bool = True  # plan actions from incidents (acting stays off unless the policy)
    healer_policy_file: Path | None = None  # TOML or YAML; unset: built-in defaults, observe only
    healer_interval_s: float = 5.0  # a pass at least this often (correlator changes wake it sooner)
    healer_command_timeout_s: float = 30.0  # each scontrol/sbatch/API call

    # --- dashboard and alerts (web/notify) ---
    fleet_cache_s: float = 5.0  # the classified fleet is reused this long by pages and /metrics
    notify_enabled: bool = False  # the server sends alerts on the routes configured below
    notify_routes_file: Path | None = None  # TOML: [[route]]s, [users.NAME] contacts, [owners]
    notify_interval_s: float = 5.0  # how often new incident changes are sent
    notify_base_url: str = "http://127.0.0.1:8080"  # links in alerts point here
    notify_rate_per_minute: int = 30  # messages per route per minute; the rest wait
    notify_retry_attempts: int = 3  # tries within one pass (exponential backoff)
    notify_max_attempts: int = 8  # passes before a delivery is marked failed
    notify_backoff_s: float = 1.0  # first retry wait; doubles each time
    notify_timeout_s: float = 10.0  # HTTP and SMTP timeout per try
    notify_alertmanager_resend_s: float = 60.0  # re-send open alerts this often
    notify_smtp_host: str = "127.0.0.1"
    notify_smtp_port: int = 25
    notify_smtp_from: str = "fleetmedic@localhost"
    notify_smtp_starttls: bool = False
    notify_smtp_user: str | None = None
    notify_smtp_password: SecretStr | None = None
    notify_mail_domain: str | None = None  # job owner USER without a contact: USER@this domain
    notify_owner_sink: str = "email"  # how job owners are told: email or slack
    notify_idle_nudge_hours: float | None = None  # nudge owners of GPUs idle this long; off
    notify_demo_receiver_url: str | None = (
        None  # the demo's local receiver, linked on /notifications
    )
    metrics_per_gpu: bool = False  # opt in to per-GPU utilization series on /metrics

    # --- GPU samples backend (events, jobs, incidents and actions stay in the SQL store) ---
    samples_backend: Literal["sql", "victoriametrics"] = "sql"
    victoriametrics_url: str = "http://127.0.0.1:8428"  # single node, or vminsert+vmselect proxy
    victoriametrics_timeout_s: float = 10.0  # per request; a write retries twice, then 503
    victoriametrics_latest_lookback_s: float = 3600.0  # a GPU silent longer shows no sample
    # The newest rows are read over this window first, the whole lookback only for GPUs silent
    # this long: a reporting fleet's reads then cover minutes of points, not an hour's.
    victoriametrics_latest_recent_s: float = Field(default=300.0, gt=0.0)

    # --- Prometheus source: GPU telemetry from a site's Prometheus scraping dcgm-exporter ---
    prometheus_enabled: bool = False
    prometheus_url: str = "http://127.0.0.1:9090"
    prometheus_selector: str = '{__name__=~"DCGM_.+"}'  # narrow with a job label, etc.
    prometheus_node_label: str = "Hostname"  # dcgm-exporter's label naming the GPU's node
    prometheus_interval_s: float = 30.0  # dcgm-exporter collects every 30 s by default
    prometheus_timeout_s: float = 10.0

    _tokens = field_validator("agent_tokens", "api_tokens", mode="before")(_split_tokens)
    _split = field_validator(
        "kubernetes_user_keys",
        "wandb_dirs",
        "wandb_projects",
        mode="before",
    )(_split_list)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Init args win over the environment, which wins over the config file."""
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        config_file = os.environ.get("FLEETMEDIC_CONFIG")
        if config_file:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=config_file))
        return tuple(sources)

    def __repr_args__(self) -> Any:
        """Like pydantic's, with the database password masked (SecretStr masks the rest)."""
        for name, value in super().__repr_args__():
            yield name, (self.safe_database_url() if name == "database_url" else value)

    def safe_database_url(self) -> str:
        """The database URL with any password masked, for logs and banners."""
        # Imported here: the node agent reads these settings and never needs SQLAlchemy.
        from sqlalchemy.engine import make_url

        return make_url(self.database_url).render_as_string(hide_password=True)

    def agent_token_values(self) -> set[str]:
        """The plain agent tokens, for comparison only."""
        return {t.get_secret_value() for t in self.agent_tokens}

    def api_token_values(self) -> set[str]:
        """The plain read-API tokens, for comparison only."""
        return {t.get_secret_value() for t in self.api_tokens}
