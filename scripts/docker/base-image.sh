#!/usr/bin/env bash
# Print (on stdout, and nothing else) the base image netstack's Dockerfile builds on, after
# making sure it exists locally:
#   1. $NETSTACK_BASE_IMAGE, as is (pulled if it is not present locally);
#   2. debian:bookworm-slim if present locally, else if `docker pull` gets it within 20 s
#      (no attempt when NETSTACK_OFFLINE=1);
#   3. else netstack/base:bookworm, built here OFFLINE from a registry's point of view: a
#      debootstrap --variant=minbase root of Debian bookworm (from the machine's Debian apt
#      mirror) with what netstack needs at run time, turned into an image by `docker import`.
# Progress goes to stderr. Run as root (debootstrap and docker need it).
set -euo pipefail

SUITE=bookworm
SLIM_IMAGE=debian:bookworm-slim
OWN_IMAGE=netstack/base:bookworm
# what netstack needs at run time (the Dockerfile's apt-get step installs the same list into a
# registry's slim image): Python with venv/ensurepip, ip/tc/bridge, nft, ping, ps/pkill
PACKAGES=(python3 python3-venv iproute2 nftables iputils-ping procps)
DEFAULT_MIRROR=http://deb.debian.org/debian
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
PATH_ENV=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

log() { printf '[base] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

usage() {
    cat <<USAGE
usage: scripts/docker/base-image.sh [--help]

Print the name of the base image for netstack's Dockerfile, making sure it exists locally:
  \$NETSTACK_BASE_IMAGE if set (pulled if absent); else $SLIM_IMAGE if present or pullable
  (not tried when NETSTACK_OFFLINE=1); else $OWN_IMAGE, built offline with debootstrap
  from the Debian mirror of this machine's apt sources (override: NETSTACK_DEBIAN_MIRROR).
Only the image name goes to stdout; progress goes to stderr. Run as root.
USAGE
}

case "${1:-}" in
    -h|--help) usage; exit 0 ;;
    "") ;;
    *) usage >&2; exit 2 ;;
esac

[ "$(id -u)" -eq 0 ] || die "run this as root (sudo): debootstrap and docker need it"
command -v docker >/dev/null 2>&1 || die "no docker client: run scripts/docker/ensure-docker.sh first"

have_image() { docker image inspect "$1" >/dev/null 2>&1; }

# 1. an explicit choice
if [ -n "${NETSTACK_BASE_IMAGE:-}" ]; then
    if ! have_image "$NETSTACK_BASE_IMAGE"; then
        log "NETSTACK_BASE_IMAGE=$NETSTACK_BASE_IMAGE is not present locally: docker pull"
        docker pull "$NETSTACK_BASE_IMAGE" >&2 \
            || die "cannot pull NETSTACK_BASE_IMAGE=$NETSTACK_BASE_IMAGE (no registry? unset it to build $OWN_IMAGE offline)"
    fi
    log "using NETSTACK_BASE_IMAGE=$NETSTACK_BASE_IMAGE"
    echo "$NETSTACK_BASE_IMAGE"
    exit 0
fi

# 2. the registry's slim image
if have_image "$SLIM_IMAGE"; then
    log "using $SLIM_IMAGE (present locally)"
    echo "$SLIM_IMAGE"
    exit 0
fi
# (tried on every run, even when our own image exists, so that a registry that answers again is
# used again; where a registry does not fail fast, NETSTACK_OFFLINE=1 saves the 20 s)
if [ "${NETSTACK_OFFLINE:-0}" != 1 ]; then
    log "trying docker pull $SLIM_IMAGE (20 s at most; NETSTACK_OFFLINE=1 skips this)"
    if timeout 20 docker pull -q "$SLIM_IMAGE" >/dev/null 2>&1; then
        log "using $SLIM_IMAGE (pulled)"
        echo "$SLIM_IMAGE"
        exit 0
    fi
    log "no registry answers: falling back to $OWN_IMAGE"
fi

# 3. our own, from debootstrap
if have_image "$OWN_IMAGE"; then
    log "using $OWN_IMAGE (present locally)"
    echo "$OWN_IMAGE"
    exit 0
fi

command -v debootstrap >/dev/null 2>&1 \
    || die "debootstrap is missing: run scripts/docker/ensure-docker.sh (it installs it) or apt-get install debootstrap"

# The first Debian archive URI of the machine's apt sources (one-line .list and deb822 .sources
# formats; commented lines ignored); the -security/-ports archives and non-Debian ones
# (an Ubuntu host's archive.ubuntu.com) do not count.
apt_mirror() {
    local f
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        sed -e 's/#.*//' "$f" | awk '
            $1 == "deb" { for (i = 2; i <= NF; i++) if ($i !~ /^\[/ && $i !~ /\]$/ && $i ~ /:\/\//) { print $i; break } }
            tolower($1) == "uris:" { for (i = 2; i <= NF; i++) print $i }'
    done | grep -E '^(https?|file)://[^ ]*/debian/?$' | head -n 1 | sed 's:/$::'
}

mirror=${NETSTACK_DEBIAN_MIRROR:-$(apt_mirror || true)}
mirror=${mirror:-$DEFAULT_MIRROR}

gpg_opts=()
if [ ! -f "$KEYRING" ]; then
    log "warning: $KEYRING is missing (apt-get install debian-archive-keyring fixes that):"
    log "         debootstrap runs with --no-check-gpg, i.e. WITHOUT verifying the packages' signatures"
    gpg_opts=(--no-check-gpg)
else
    gpg_opts=(--keyring="$KEYRING")
fi

workdir=$(mktemp -d "${TMPDIR:-/var/tmp}/netstack-base.XXXXXX")
root=$workdir/root
cleanup() {
    # debootstrap may leave proc/sys (or a bind-mounted /dev) mounted in the root when it fails:
    # unmount everything under it, deepest first, then remove it without crossing file systems
    local m
    awk -v d="$workdir/" 'index($2, d) == 1 { print $2 }' /proc/mounts | sort -r | while read -r m; do
        umount -l "$m" 2>/dev/null || true
    done
    rm -rf --one-file-system "$workdir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

t0=$SECONDS
log "building $OWN_IMAGE offline: debootstrap --variant=minbase $SUITE from $mirror (takes ~1 min)"
pkgs=$(IFS=,; echo "${PACKAGES[*]}")
if ! debootstrap --variant=minbase --include="$pkgs" "${gpg_opts[@]}" \
        "$SUITE" "$root" "$mirror" >"$workdir/debootstrap.log" 2>&1; then
    tail -n 25 "$workdir/debootstrap.log" | sed 's/^/[base]   /' >&2
    [ -f "$root/debootstrap/debootstrap.log" ] && tail -n 25 "$root/debootstrap/debootstrap.log" | sed 's/^/[base]   /' >&2
    die "debootstrap failed (mirror $mirror; set NETSTACK_DEBIAN_MIRROR to use another)"
fi
log "debootstrap done in $((SECONDS - t0)) s; slimming the root"

# like the registry's slim images: no docs (but copyrights), man pages, locales; and keep
# later apt-get installs in derived images from bringing them back
cat >"$root/etc/dpkg/dpkg.cfg.d/netstack-slim" <<'DPKG'
# netstack/base: keep images small (as debian:*-slim does)
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
DPKG
find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
rm -rf "$root"/usr/share/{man,groff,info,lintian,linda,locale}/*
# apt's caches and lists (an `apt-get update` in a derived image fetches them again)
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
       "$root"/var/cache/apt/archives/partial/* "$root"/var/cache/debconf/*-old "$root"/var/lib/dpkg/*-old
find "$root/var/log" -type f -delete
# the host's name and resolver do not belong in an image (docker provides both at run time)
: >"$root/etc/resolv.conf"
echo localhost >"$root/etc/hostname"

py=$(chroot "$root" python3 -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')
log "importing the root ($(du -sh --one-file-system "$root" | cut -f1), Python $py) as $OWN_IMAGE"
# /dev, /proc, /sys stay empty: docker provides them in every container
tar -C "$root" --numeric-owner --exclude=./dev/* --exclude=./proc/* --exclude=./sys/* -c . \
    | docker import \
        --change "ENV PATH=$PATH_ENV" \
        --change 'ENV LANG=C.UTF-8' \
        --change 'CMD ["/bin/bash"]' \
        --change "LABEL org.opencontainers.image.title=netstack-base org.opencontainers.image.description=\"Debian $SUITE minbase (debootstrap) with python3, iproute2, nftables for netstack\" org.opencontainers.image.base.name=debian:$SUITE" \
        --message "debootstrap --variant=minbase $SUITE $mirror +${pkgs}" \
        - "$OWN_IMAGE" >/dev/null
log "built $OWN_IMAGE in $((SECONDS - t0)) s"
echo "$OWN_IMAGE"
