#!/usr/bin/env bash
# A throwaway real Slurm 22.05 cluster on loopback: 3 nodes x 8 fake GPUs, with slurmdbd and its
# own private mariadbd, everything under one directory. Recipe and measurements:
# ../shared/reference/slurm-22.05/RECIPE.md (Debian 12, root, no systemd).
#
#   cluster.sh start [DIR]   install when root and missing, start, wait for 3 idle nodes, print env
#   cluster.sh stop  [DIR]   cancel jobs, kill our daemons by PID file, remove DIR
#   cluster.sh status [DIR]  exit 0 when the cluster answers with idle nodes
#   cluster.sh env   [DIR]   print the SLURM_CONF line a client needs
#
# DIR defaults to $FLEETMEDIC_SLURM_DIR or /tmp/fleetmedic-slurm. Ports: the first free block of
# 10 from 26800, 27800, ... so two clusters (or another Slurm) on one host do not collide.
# FLEETMEDIC_SLURM_TIMING=default starts it with Slurm's own timing defaults (cred_expire 120 s,
# sched_interval 60 s, bf_interval 30 s, KillWait 30 s), as users run it; the default here,
# "fast", shortens those so the collector's tests wait less.
set -uo pipefail

CMD="${1:-}"
R="${2:-${FLEETMEDIC_SLURM_DIR:-/tmp/fleetmedic-slurm}}"
NODES=3
GPUS=8
READY_TIMEOUT_S="${SLURM_READY_TIMEOUT_S:-60}"
export SLURM_CONF="$R/etc/slurm.conf"

die() {
  echo "cluster.sh: ERROR: $*" >&2
  for f in "$R"/log/*.log "$R"/log/*.err; do
    [ -s "$f" ] || continue
    echo "---- last lines of $f" >&2
    tail -n 15 "$f" >&2
  done
  # A start that failed half-way leaves nothing running behind it.
  if [ "${STARTING:-0}" = 1 ]; then STARTING=0; do_stop; fi
  exit 1
}

need_root() { [ "$(id -u)" = 0 ] || die "must run as root (mknod for fake GPUs, daemons as root)"; }

install_if_missing() {
  local missing=0 b
  for b in slurmctld slurmd slurmdbd sacct munged mariadbd mariadb-install-db; do
    command -v "$b" >/dev/null 2>&1 || [ -x "/usr/sbin/$b" ] || missing=1
  done
  [ "$missing" = 0 ] && return 0
  if [ -z "${FLEETMEDIC_SLURM_INSTALL_LOCKED:-}" ] && command -v flock >/dev/null 2>&1; then
    # Two test runs at once must not race dpkg: the second waits, then finds it installed.
    FLEETMEDIC_SLURM_INSTALL_LOCKED=1 flock "${TMPDIR:-/tmp}/fleetmedic-slurm-install.lock" \
      bash "$0" install "$R" || die "install failed"
    return 0
  fi
  command -v apt-get >/dev/null 2>&1 || die "Slurm is not installed and apt-get is not available"
  echo "cluster.sh: installing slurm-wlm slurmdbd munge mariadb-server (apt-get)" >&2
  # policy-rc.d (when present) keeps postinst from starting system daemons.
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
    slurm-wlm slurmdbd munge mariadb-server >"$R.apt.log" 2>&1 \
    || { apt-get update >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y \
      --no-install-recommends slurm-wlm slurmdbd munge mariadb-server >"$R.apt.log" 2>&1; } \
    || { tail -n 20 "$R.apt.log" >&2; die "apt-get install failed (log: $R.apt.log)"; }
  rm -f "$R.apt.log"
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Port blocks are reserved atomically (noclobber) in a shared folder, so two clusters starting at
# once (two test runs) never take the same block; a reservation whose cluster dir is gone is stale.
RESERVE_DIR="${TMPDIR:-/tmp}/fleetmedic-slurm-ports"

reserve() {
  local f="$RESERVE_DIR/$1" owner
  mkdir -p "$RESERVE_DIR"
  if (set -o noclobber; echo "$R" >"$f") 2>/dev/null; then return 0; fi
  owner="$(cat "$f" 2>/dev/null)"
  [ "$owner" = "$R" ] && return 0
  if [ -n "$owner" ] && [ ! -d "$owner" ]; then
    rm -f "$f"
    (set -o noclobber; echo "$R" >"$f") 2>/dev/null && return 0
  fi
  return 1
}

release() {
  local f
  for f in "$RESERVE_DIR"/*; do
    [ -f "$f" ] && [ "$(cat "$f" 2>/dev/null)" = "$R" ] && rm -f "$f"
  done
  rmdir "$RESERVE_DIR" 2>/dev/null
  return 0
}

pick_base() {
  local base p ok
  for base in 26800 27800 28800 29800 31800 33800 35800 37800; do
    reserve "$base" || continue
    ok=1
    for p in $((base + 6)) $((base + 7)) $((base + 8)) $((base + 9)) \
      $((base + 11)) $((base + 12)) $((base + 13)); do
      port_free "$p" || { ok=0; break; }
    done
    [ "$ok" = 1 ] && { echo "$base"; return 0; }
    rm -f "$RESERVE_DIR/$base"
  done
  die "no free port block found"
}

# A PID from a file is alive when /proc says so and it is not a zombie (killed daemons stay Z
# until PID 1 reaps them, so kill -0 is not a liveness test).
alive() {
  local pid="$1" st
  [ -n "$pid" ] && [ -r "/proc/$pid/stat" ] || return 1
  st="$(sed -E 's/^[0-9]+ \(.*\) ([A-Za-z]).*/\1/' "/proc/$pid/stat" 2>/dev/null)"
  [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

pid_of() { [ -r "$1" ] && tr -dc '0-9' <"$1"; }

kill_pidfile() {
  local f="$1" pid i
  pid="$(pid_of "$f")" || return 0
  [ -n "$pid" ] || return 0
  alive "$pid" || return 0
  kill -TERM "$pid" 2>/dev/null
  for i in $(seq 1 50); do alive "$pid" || return 0; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null
}

# slurmstepd and job processes inherit SLURM_CONF from our slurmd: that marks them as ours.
kill_our_leftovers() {
  local p
  for p in /proc/[0-9]*; do
    [ -r "$p/environ" ] || continue
    if { tr '\0' '\n' <"$p/environ"; } 2>/dev/null | grep -qxF "SLURM_CONF=$SLURM_CONF"; then
      [ "${p#/proc/}" = "$$" ] || kill -KILL "${p#/proc/}" 2>/dev/null
    fi
  done
}

write_configs() {
  local base="$1" host="$2" auth_extra="" timing
  timing="KillWait=2
SchedulerParameters=bf_interval=1,sched_interval=2"
  if [ "${FLEETMEDIC_SLURM_TIMING:-fast}" = default ]; then
    timing="# Slurm's default timing: no cred_expire, sched_interval, bf_interval or KillWait here"
  else
    auth_extra=",cred_expire=5"
  fi
  local ctld=$((base + 17)) slurmd=$((base + 18)) dbd=$((base + 19)) db=$((base + 6))
  mkdir -p "$R"/{etc,munge,log,run,spool/ctld,spool/d,db,fakegpu,jobs}
  chmod 755 "$R" "$R/munge"  # munged: "execute permissions for all required"
  echo "$base" >"$R/run/port_base"
  cat >"$R/etc/slurm.conf" <<EOF
ClusterName=fmtest
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmctldPort=$ctld
SlurmdPort=$slurmd
AuthType=auth/munge
AuthInfo=socket=$R/munge/munge.socket.2$auth_extra
StateSaveLocation=$R/spool/ctld
SlurmdSpoolDir=$R/spool/d/%n
SlurmctldPidFile=$R/run/slurmctld.pid
SlurmdPidFile=$R/run/slurmd-%n.pid
SlurmctldLogFile=$R/log/slurmctld.log
SlurmdLogFile=$R/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/linux
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
GresTypes=gpu
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=$dbd
AccountingStoragePass=$R/munge/munge.socket.2
AccountingStorageTRES=gres/gpu
JobRequeue=1
ReturnToService=2
MailProg=/bin/true
$timing
NodeName=node[1-$NODES] NodeHostname=$host NodeAddr=127.0.0.1 Port=[$((base + 11))-$((base + 10 + NODES))] CPUs=8 RealMemory=8000 Gres=gpu:$GPUS State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
  echo "NodeName=node[1-$NODES] Name=gpu File=$R/fakegpu/nvidia[0-$((GPUS - 1))]" >"$R/etc/gres.conf"
  cat >"$R/etc/slurmdbd.conf" <<EOF
AuthType=auth/munge
AuthInfo=socket=$R/munge/munge.socket.2
DbdHost=localhost
DbdPort=$dbd
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$db
StorageUser=slurm
StoragePass=slurmpw
StorageLoc=slurm_acct_db
LogFile=$R/log/slurmdbd.log
PidFile=$R/run/slurmdbd.pid
EOF
  chmod 600 "$R/etc/slurmdbd.conf"
  local i
  for i in $(seq 0 $((GPUS - 1))); do
    [ -c "$R/fakegpu/nvidia$i" ] || mknod "$R/fakegpu/nvidia$i" c 195 "$i" || die "mknod failed"
  done
}

wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
  local limit="$1" what="$2" end
  shift 2
  end=$(($(date +%s) + limit))
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$end" ] || die "timed out after ${limit}s waiting for $what"
    sleep 0.2
  done
}

all_idle() {
  local n
  n="$(sinfo -h -N -o '%N %t' 2>/dev/null | awk '$2 == "idle" {c++} END {print c + 0}')"
  [ "$n" -ge "$NODES" ]
}

start_daemons() {
  local base="$1" db=$(($1 + 6)) n
  [ -s "$R/munge/munge.key" ] || {
    dd if=/dev/urandom of="$R/munge/munge.key" bs=1024 count=1 2>/dev/null
    chmod 600 "$R/munge/munge.key"
  }
  munged --socket="$R/munge/munge.socket.2" --key-file="$R/munge/munge.key" \
    --pid-file="$R/run/munged.pid" --log-file="$R/log/munged.log" \
    --seed-file="$R/munge/munged.seed" || die "munged did not start"
  if [ ! -d "$R/db/mysql" ]; then
    mariadb-install-db --no-defaults --datadir="$R/db" --user=root \
      --auth-root-authentication-method=socket --skip-test-db >"$R/log/install-db.txt" 2>&1 \
      || die "mariadb-install-db failed"
  fi
  setsid mariadbd --no-defaults --datadir="$R/db" --user=root --socket="$R/run/mysqld.sock" \
    --pid-file="$R/run/mysqld.pid" --bind-address=127.0.0.1 --port="$db" \
    --log-error="$R/log/mysqld.err" --innodb-lock-wait-timeout=900 </dev/null >/dev/null 2>&1 &
  wait_for 30 "mariadbd" mariadb --no-defaults -S "$R/run/mysqld.sock" -u root -e "select 1"
  mariadb --no-defaults -S "$R/run/mysqld.sock" -u root -e "
    CREATE DATABASE IF NOT EXISTS slurm_acct_db;
    CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurmpw';
    GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';" || die "cannot create the slurm DB user"
  slurmdbd || die "slurmdbd did not start"
  wait_for 30 "slurmdbd" sacctmgr -n list cluster
  slurmctld || die "slurmctld did not start"
  wait_for 30 "slurmctld" scontrol ping
  for n in $(seq 1 "$NODES"); do slurmd -N "node$n" || die "slurmd node$n did not start"; done
  wait_for "$READY_TIMEOUT_S" "$NODES idle nodes (sinfo)" all_idle
}

do_stop() {
  local f
  [ -d "$R" ] || return 0
  if [ -f "$SLURM_CONF" ] && alive "$(pid_of "$R/run/slurmctld.pid")"; then
    timeout 5 scancel --full --quiet --user=root >/dev/null 2>&1
    timeout 5 bash -c 'until [ -z "$(squeue -h -t R,CG -o %i 2>/dev/null)" ]; do sleep 0.2; done'
  fi
  for f in "$R"/run/slurmd-*.pid; do [ -e "$f" ] && kill_pidfile "$f"; done
  kill_pidfile "$R/run/slurmctld.pid"
  kill_pidfile "$R/run/slurmdbd.pid"
  kill_pidfile "$R/run/mysqld.pid"
  kill_pidfile "$R/run/munged.pid"
  kill_our_leftovers
  release
  rm -rf "$R"
}

do_status() {
  [ -f "$SLURM_CONF" ] && alive "$(pid_of "$R/run/slurmctld.pid")" \
    && alive "$(pid_of "$R/run/slurmdbd.pid")" && all_idle
}

do_start() {
  need_root
  mkdir -p "$R"  # install_if_missing logs next to it
  install_if_missing
  if do_status; then
    echo "export SLURM_CONF=$SLURM_CONF"
    return 0
  fi
  do_stop  # a half-started or dead cluster: start over from scratch
  mkdir -p "$R"  # before the port reservation: a reservation whose dir is missing is stale
  STARTING=1
  local base host
  base="$(pick_base)" || exit 1
  host="$(hostname -s)"
  write_configs "$base" "$host"
  start_daemons "$base"
  STARTING=0
  echo "export SLURM_CONF=$SLURM_CONF"
}

case "$CMD" in
  start) do_start ;;
  install) need_root; install_if_missing ;;
  stop) do_stop ;;
  status) do_status ;;
  env) echo "export SLURM_CONF=$SLURM_CONF" ;;
  *) echo "usage: $0 start|stop|status|env [DIR]" >&2; exit 2 ;;
esac
