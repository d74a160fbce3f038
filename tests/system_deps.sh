#!/usr/bin/env bash
# Installs the Debian packages the real-service tests use, when running as root and missing:
# Chromium (dashboard), Prometheus and Alertmanager (metrics and alert tests), VictoriaMetrics
# (the time-series samples backend), Slurm + munge +
# MariaDB (real Slurm cluster), systemd (systemd-analyze verifies the units in charts/systemd;
# the package is not booted). Without root it only says
# what is missing; those tests then skip loudly (and fail where REQUIRE_*=1, as in CI).
set -u
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium fonts-dejavu-core)
command -v prometheus >/dev/null 2>&1 || need+=(prometheus)
command -v prometheus-alertmanager >/dev/null 2>&1 || need+=(prometheus-alertmanager)
command -v victoria-metrics >/dev/null 2>&1 || need+=(victoria-metrics)
command -v systemd-analyze >/dev/null 2>&1 || need+=(systemd)
for bin in slurmctld slurmd slurmdbd munged mariadbd; do
  command -v "$bin" >/dev/null 2>&1 || { need+=(slurm-wlm slurmdbd munge mariadb-server); break; }
done
if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" != "0" ]; then
  echo "NOTE: not root; not installing ${need[*]}: tests needing them will be SKIPPED" >&2
  exit 0
fi
echo "installing system packages: ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null 2>&1 || true
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
