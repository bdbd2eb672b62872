#!/usr/bin/env bash
# The one command that builds netstack's container image, offline-capable (no image registry
# needed; the Debian apt mirror and PyPI are used the first time only):
#   1. scripts/docker/ensure-docker.sh   Docker installed and answering
#   2. scripts/docker/base-image.sh      the base image (debian:bookworm-slim, or our debootstrap one)
#   3. scripts/docker/wheelhouse.sh      build/wheelhouse for that base's Python/platform
#   4. docker build --build-arg BASE=<base> -t ${NETSTACK_IMAGE:-netstack:latest} .
# A second run changes nothing: every step is cached (same image ID).
#
# Which source edits rebuild what (see the Dockerfile's header): editing netstack/, headers/,
# daemons/, README.md or pyproject.toml reruns only the last steps (netstack's wheel and its
# install, seconds); changing pyproject.toml's dependencies changes the wheelhouse and reruns the
# dependency install; tests/, docs/, results/, scripts/ are not in the build context at all.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
HERE=$REPO/scripts/docker
IMAGE=${NETSTACK_IMAGE:-netstack:latest}

log() { printf '[build] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

usage() {
    cat <<'USAGE'
usage: scripts/docker/build-image.sh [--no-cache] [--help]

Build netstack's container image (tag: $NETSTACK_IMAGE, default netstack:latest), as root:
Docker is installed/started if needed, the base image is a registry's debian:bookworm-slim or,
offline, netstack/base:bookworm made with debootstrap, and Python packages come from
build/wheelhouse (no network inside the build).
  --no-cache    passed to docker build (rebuild every layer; the base image and the
                wheelhouse are kept)
Environment: NETSTACK_IMAGE, NETSTACK_BASE_IMAGE (use that base), NETSTACK_OFFLINE=1 (do not
try the registry), NETSTACK_DEBIAN_MIRROR (debootstrap's mirror).
Run it:  docker run --rm --cap-add NET_ADMIN --cap-add NET_RAW netstack:latest ...
USAGE
}

build_opts=()
for arg in "$@"; do
    case $arg in
        -h|--help) usage; exit 0 ;;
        --no-cache) build_opts+=(--no-cache) ;;
        *) usage >&2; exit 2 ;;
    esac
done

[ "$(id -u)" -eq 0 ] || die "run this as root (sudo): it installs/starts docker and runs debootstrap"

t_all=$SECONDS
t=$SECONDS
"$HERE/ensure-docker.sh"
log "docker ready ($((SECONDS - t)) s)"

t=$SECONDS
base=$("$HERE/base-image.sh")
log "base image: $base ($((SECONDS - t)) s)"

t=$SECONDS
"$HERE/wheelhouse.sh" "$base"
log "wheelhouse ready ($((SECONDS - t)) s)"

version=$(sed -n 's/^version *= *"\(.*\)"/\1/p' "$REPO/pyproject.toml" | head -n 1)

# The classic builder (DOCKER_BUILDKIT=0), on purpose: the docker client first on PATH may be a
# recent static one (28.x) whose BuildKit path needs the buildx plugin, which Debian's docker.io
# 20.10 does not ship (`DOCKER_BUILDKIT=1` then fails: "buildx component is missing"); the 20.10
# client's built-in BuildKit would work but is not the client everybody gets. The classic
# builder works with both clients and the 20.10 daemon, needs no plugin, supports all this
# Dockerfile uses (ARG before FROM, multi-stage, COPY --from) and prints "Using cache" per step.
# (The 28.x client prints a deprecation notice for it; harmless.)
# The classic builder keeps a stage's result only as an untagged (dangling) image, and
# `docker image prune` deletes dangling images: that would throw away the cached dependency
# layers (the venv is not byte-reproducible, so a rebuild also means a new image ID). Building
# the "wheel" stage (which sits on top of "deps") under a tag of its own first protects them;
# the full build after it then finds every stage step in the cache.
CACHE_TAG=${NETSTACK_CACHE_IMAGE:-netstack-buildcache:wheel}
old_ids=$(docker image inspect --format '{{.Id}}' "$IMAGE" "$CACHE_TAG" 2>/dev/null || true)
build() { DOCKER_BUILDKIT=0 docker build --build-arg "BASE=$base" "$@" . >&2; }
t=$SECONDS
log "docker build -t $IMAGE (BASE=$base${build_opts:+, ${build_opts[*]}})"
cd "$REPO"
build "${build_opts[@]}" --target wheel -t "$CACHE_TAG"
build --build-arg "NETSTACK_VERSION=${version:-unknown}" -t "$IMAGE"
log "docker build done ($((SECONDS - t)) s)"

# the images these tags pointed to before, now untagged and unused: ours, remove them
for old in $old_ids; do
    if [ -z "$(docker image inspect --format '{{join .RepoTags ""}}' "$old" 2>/dev/null || echo x)" ]; then
        if docker rmi "$old" >/dev/null 2>&1; then
            log "removed the previous build's untagged image ${old#sha256:}"
        fi
    fi
done

id=$(docker image inspect --format '{{.Id}}' "$IMAGE")
size=$(docker image inspect --format '{{.Size}}' "$IMAGE")
log "image $IMAGE: $id, $((size / 1000000)) MB; total $((SECONDS - t_all)) s"
echo "$id"
