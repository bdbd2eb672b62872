#!/usr/bin/env bash
# Make sure a Docker engine answers on this machine (Debian/Ubuntu, as root):
#   - installs docker.io, docker-compose and debootstrap with apt-get when docker, dockerd,
#     docker-compose or debootstrap is missing (apt-get update only if the install needs it);
#   - starts the daemon when `docker info` does not answer: `systemctl start docker` on a
#     systemd machine, else dockerd by hand in the background (log: /var/log/netstack-dockerd.log),
#     and waits up to 30 s for it.
# Idempotent: does nothing (but check) when docker already runs. Progress goes to stderr.
set -euo pipefail

LOG=/var/log/netstack-dockerd.log
WAIT_S=30

log() { printf '[docker] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

usage() {
    cat <<'USAGE'
usage: scripts/docker/ensure-docker.sh [--help]

Install (apt-get: docker.io docker-compose debootstrap) and start a Docker engine if needed,
then wait until `docker info` answers. Run as root. Safe to run when docker already runs.
USAGE
}

case "${1:-}" in
    -h|--help) usage; exit 0 ;;
    "") ;;
    *) usage >&2; exit 2 ;;
esac

[ "$(id -u)" -eq 0 ] || die "run this as root (sudo): it installs packages and starts dockerd"

# --- packages --------------------------------------------------------------------------------
missing=()
{ command -v docker >/dev/null 2>&1 && command -v dockerd >/dev/null 2>&1; } || missing+=(docker.io)
command -v docker-compose >/dev/null 2>&1 || missing+=(docker-compose)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
if [ "${#missing[@]}" -gt 0 ]; then
    command -v apt-get >/dev/null 2>&1 \
        || die "missing ${missing[*]} and no apt-get here: install Docker (engine + compose) and debootstrap yourself"
    export DEBIAN_FRONTEND=noninteractive
    apt_install() { apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; }
    log "apt-get install ${missing[*]}"
    if ! apt_install 2>/dev/null; then
        log "install failed without fresh package lists: apt-get update, then again"
        apt-get update -qq
        apt_install || die "apt-get install ${missing[*]} failed"
    fi
fi

# --- daemon ----------------------------------------------------------------------------------
docker_answers() { timeout 10 docker info >/dev/null 2>&1; }

if docker_answers; then
    log "engine answers ($(docker version --format '{{.Server.Version}}' 2>/dev/null || echo '?'))"
    exit 0
fi

if [ -d /run/systemd/system ]; then
    log "systemctl start docker"
    systemctl start docker || log "systemctl start docker failed (waiting anyway)"
    LOG_HINT="journalctl -u docker"
else
    pidfile=/var/run/docker.pid
    if [ -s "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
        log "dockerd already running (pid $(cat "$pidfile")) but not answering yet: waiting for it"
        LOG_HINT="that dockerd's own log (not started here; is DOCKER_HOST=${DOCKER_HOST:-} right?)"
    else
        log "no init system: starting dockerd in the background (log: $LOG)"
        # setsid + nohup: the daemon outlives this script and its terminal
        setsid nohup dockerd >>"$LOG" 2>&1 </dev/null &
        LOG_HINT=$LOG
    fi
fi

for ((i = 0; i < WAIT_S; i++)); do
    if docker_answers; then
        log "engine answers after ${i} s ($(docker version --format '{{.Server.Version}}' 2>/dev/null || echo '?'))"
        exit 0
    fi
    sleep 1
done

log "error: docker info does not answer after ${WAIT_S} s; see $LOG_HINT"
if [ "$LOG_HINT" = "$LOG" ] && [ -f "$LOG" ]; then
    tail -n 20 "$LOG" | sed 's/^/[docker]   /' >&2
elif [ -d /run/systemd/system ] && command -v journalctl >/dev/null 2>&1; then
    journalctl -u docker -n 20 --no-pager 2>/dev/null | sed 's/^/[docker]   /' >&2 || true
fi
exit 1
