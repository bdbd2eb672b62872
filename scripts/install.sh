#!/usr/bin/env bash
# Install everything netstack needs on a Debian/Ubuntu machine, as root:
# the system packages (iproute2, nftables, Python venv support, ...) and a virtualenv
# in .venv holding netstack itself (editable) with its plots (matplotlib, the `plots` extra)
# and its test tools. etcd-server is the 1Pipe controller's replicated store
# (netstack/onepipe/etcd.py runs a local cluster of it); tcpdump compiles netstack capture's
# --filter expressions to BPF; chromium and chromium-driver run the browser tests (marker browser,
# tests/browser.py: netstack ui's page in headless Chromium, offline); the test extra brings their
# Python side (selenium) and netstack ui's server (aiohttp).
# Safe to run again: it only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(python3 python3-venv python3-dev iproute2 nftables iputils-ping procps kmod etcd-server tcpdump
              chromium chromium-driver)

log() { printf '[install] %s\n' "$*" >&2; }

if [ "$(id -u)" -ne 0 ]; then
    log "netstack builds network namespaces, veths and nft tables: run this as root (sudo)."
    exit 1
fi

if command -v apt-get >/dev/null 2>&1; then
    missing=()
    for p in "${APT_PACKAGES[@]}"; do
        dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
    done
    if [ "${#missing[@]}" -gt 0 ]; then
        log "apt-get install ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
        # netstack only needs the etcd binary (it runs its own clusters on free ports); on a
        # systemd machine the package also starts a system-wide etcd: stop what we just started
        if [[ " ${missing[*]} " == *" etcd-server "* ]] && [ -d /run/systemd/system ]; then
            log "stopping and disabling the etcd service the etcd-server package started"
            systemctl disable --now etcd >/dev/null 2>&1 || true
        fi
    fi
else
    log "no apt-get: install ${APT_PACKAGES[*]} with your package manager, then re-run"
    for cmd in ip nft python3 etcd; do
        command -v "$cmd" >/dev/null 2>&1 || { log "missing: $cmd"; exit 1; }
    done
fi

PY=${PYTHON:-python3}
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    log "$PY is $("$PY" -V 2>&1); netstack needs Python 3.11 or newer (set PYTHON=/path/to/python3.11)"
    exit 1
fi

if [ ! -x .venv/bin/python ]; then
    log "creating .venv with $("$PY" -V 2>&1)"
    "$PY" -m venv .venv
fi
log "installing netstack, its plotting (matplotlib) and its test tools into .venv"
# (no pip upgrade: the pip of any Python >= 3.11 venv installs an editable pyproject project)
.venv/bin/python -m pip install -q --no-compile --disable-pip-version-check -e '.[test,plots]'
log "done: $(.venv/bin/netstack --version)"
