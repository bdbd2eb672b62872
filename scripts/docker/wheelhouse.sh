#!/usr/bin/env bash
# Fill build/wheelhouse/ with wheels of netstack's runtime dependencies (pyproject.toml's
# [project] dependencies, read with tomllib) and of its build requirements ([build-system]
# requires: setuptools, wheel), for the Python and platform of the base image, so that the
# Dockerfile installs everything with `pip install --no-index` (no network inside the build).
#
#   scripts/docker/wheelhouse.sh [BASE_IMAGE]     (default: what base-image.sh prints)
#
# The base image's Python version, architecture and glibc are asked from the image itself
# (`docker run BASE python3 ...`; a base without python3, like the registry's slim image,
# gets the Python of its Debian release). Wheels are downloaded for exactly those tags
# (pip download --only-binary=:all: --platform manylinux_2_X_<arch> ... for every X up to the
# image's glibc). A requirement without such a wheel is built with `pip wheel --no-deps` on
# this machine; it must come out pure Python (*-none-any.whl), otherwise this fails.
#
# Reproducible: a stamp (build/wheelhouse/.stamp) records the requirement list, the base image's
# ID and its Python/platform; when it matches nothing runs at all, so the files (and the
# Dockerfile's cache key) stay byte-identical. When it does not match, the new wheelhouse is
# assembled next to the old one, taking every file the old one already has (no re-download,
# no rebuild), and then replaces it: stale wheels do not linger.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
OUT=$REPO/build/wheelhouse
STAMP=$OUT/.stamp

log() { printf '[wheelhouse] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

usage() {
    cat <<'USAGE'
usage: scripts/docker/wheelhouse.sh [--help] [BASE_IMAGE]

Download (or build, for pure-Python sdists) wheels of netstack's runtime dependencies and of
setuptools/wheel into build/wheelhouse/, for the Python/platform of BASE_IMAGE (default: the
image scripts/docker/base-image.sh prints). Does nothing when build/wheelhouse/.stamp says the
wheelhouse already matches. Run as root (it runs docker).
USAGE
}

case "${1:-}" in
    -h|--help) usage; exit 0 ;;
    -*) usage >&2; exit 2 ;;
esac
[ "$#" -le 1 ] || { usage >&2; exit 2; }

[ "$(id -u)" -eq 0 ] || die "run this as root (sudo): it runs docker"

base=${1:-$("$REPO/scripts/docker/base-image.sh")}
image_id=$(docker image inspect --format '{{.Id}}' "$base" 2>/dev/null) || die "no image $base"

# the host's pip and a Python with tomllib
if [ -x "$REPO/.venv/bin/pip" ]; then
    PIP=("$REPO/.venv/bin/pip")
    HOSTPY=$REPO/.venv/bin/python
else
    PIP=(python3 -m pip)
    HOSTPY=python3
    "$HOSTPY" -m pip --version >/dev/null 2>&1 || die "no pip on this machine: apt-get install python3-pip (or create .venv with scripts/install.sh)"
fi
PIP+=(--disable-pip-version-check --no-input)

# --- the requirements, from pyproject.toml ---------------------------------------------------
reqs=$("$HOSTPY" - "$REPO/pyproject.toml" <<'PY'
import sys
try:
    import tomllib
except ModuleNotFoundError:          # Python < 3.11
    import tomli as tomllib
with open(sys.argv[1], "rb") as f:
    data = tomllib.load(f)
print("# runtime: [project] dependencies")
for r in data["project"].get("dependencies", []):
    print(r)
print("# build: [build-system] requires")
for r in data.get("build-system", {}).get("requires", ["setuptools", "wheel"]):
    print(r)
PY
) || die "cannot read the requirements from pyproject.toml with $HOSTPY (it needs Python >= 3.11 or tomli)"
runtime_reqs=$(printf '%s\n' "$reqs" | sed -n '/^# runtime/,/^# build/p' | grep -v '^#' || true)
all_reqs=$(printf '%s\n' "$reqs" | grep -v '^#')

# --- the base image's Python and platform ----------------------------------------------------
# "<python X.Y[.Z]> <machine> <glibc X.Y>"; without python3 in the image, its Debian release's
# python3 (what the Dockerfile's apt-get step installs)
probe=$(docker run --rm --network none --entrypoint /bin/sh "$base" -c '
    if command -v python3 >/dev/null 2>&1; then
        python3 -c "import platform, sys; print(\"%d.%d.%d\" % sys.version_info[:3], platform.machine(), platform.libc_ver()[1])"
    else
        . /etc/os-release
        case "${VERSION_CODENAME:-}" in
            bookworm) py=3.11 ;; trixie) py=3.13 ;; noble) py=3.12 ;; *) py=unknown-${ID:-}-${VERSION_CODENAME:-} ;;
        esac
        echo "$py $(uname -m) $(getconf GNU_LIBC_VERSION | cut -d" " -f2)"
    fi') || die "cannot run $base to find its Python and platform"
read -r py_version machine glibc <<<"$probe"
[[ $py_version =~ ^3\.[0-9]+ ]] || die "cannot tell which Python $base has or gets ($probe)"
[[ $glibc =~ ^2\.[0-9]+$ ]] || die "cannot tell the glibc of $base ($probe): only glibc (manylinux) bases are supported"
py_short=$(cut -d. -f1,2 <<<"$py_version")
abi=cp${py_short/./}
glibc_minor=${glibc#2.}

# every manylinux tag up to the image's glibc (and the legacy aliases)
platforms=()
first=17
case $machine in x86_64|i686) first=5 ;; esac
for ((m = glibc_minor; m >= first; m--)); do platforms+=(--platform "manylinux_2_${m}_${machine}"); done
[ "$glibc_minor" -ge 17 ] && platforms+=(--platform "manylinux2014_${machine}")
case $machine in x86_64|i686)
    [ "$glibc_minor" -ge 12 ] && platforms+=(--platform "manylinux2010_${machine}")
    platforms+=(--platform "manylinux1_${machine}") ;;
esac

stamp_text=$(printf 'base %s\nimage %s\npython %s %s\nplatform %s glibc %s\nrequirements:\n%s\n' \
    "$base" "$image_id" "$py_version" "$abi" "$machine" "$glibc" "$all_reqs")

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$stamp_text" ]; then
    log "up to date for $base (Python $py_version, $machine, glibc $glibc): $(find "$OUT" -name '*.whl' | wc -l) wheels"
    exit 0
fi

# --- assemble a new wheelhouse next to the old one -------------------------------------------
mkdir -p "$REPO/build"
exec 9>"$REPO/build/.wheelhouse.lock"
flock 9
new=$(mktemp -d "$REPO/build/wheelhouse.new.XXXXXX")
trap 'rm -rf "$new"' EXIT
reuse=()
[ -d "$OUT" ] && reuse=(--find-links "$OUT")

t0=$SECONDS
log "for $base: Python $py_version ($abi), $machine, glibc $glibc"
mapfile -t req_args <<<"$all_reqs"
built=()
for attempt in 1 2 3 4 5 6 7 8 9 10; do
    # the old wheelhouse and what was built here so far are find-links: what is already there
    # is copied, not fetched or built again
    if "${PIP[@]}" download --quiet --dest "$new" --find-links "$new" "${reuse[@]}" \
            --only-binary=:all: --implementation cp --python-version "$py_version" --abi "$abi" \
            "${platforms[@]}" "${req_args[@]}" 2>"$new/.pip.log"; then
        break
    fi
    # a requirement with no wheel for these tags (an sdist only): build it here, once
    missing=$(sed -n 's/^ERROR: No matching distribution found for \(.*\)$/\1/p' "$new/.pip.log" | head -n 1)
    if [ -z "$missing" ] || [ "$attempt" = 10 ] || [[ " ${built[*]} " == *" $missing "* ]]; then
        grep -v 'is ignored: it is neither a file nor a directory' "$new/.pip.log" | tail -n 20 | sed 's/^/[wheelhouse]   /' >&2
        die "pip download failed"
    fi
    log "no wheel of '$missing' for $abi/$machine: pip wheel --no-deps (must be pure Python)"
    before=$(find "$new" -maxdepth 1 -name '*.whl' | sort)
    # SOURCE_DATE_EPOCH: fixed zip timestamps in the built wheel
    SOURCE_DATE_EPOCH=315532800 "${PIP[@]}" wheel --quiet --no-deps --wheel-dir "$new" "$missing" >&2 \
        || die "pip wheel $missing failed"
    for w in $(comm -13 <(printf '%s\n' "$before") <(find "$new" -maxdepth 1 -name '*.whl' | sort)); do
        [[ $w == *-none-any.whl ]] || die "$(basename "$w") is not pure Python: it cannot be built here for $machine/$abi; find a wheel for it"
    done
    built+=("$missing")
done
rm -f "$new/.pip.log"

printf '%s\n' "$runtime_reqs" >"$new/requirements.txt"
printf '%s\n' "$stamp_text" >"$new/.stamp"
rm -rf "$OUT"
mv "$new" "$OUT"
chmod 755 "$OUT"
trap - EXIT
log "$(find "$OUT" -name '*.whl' | wc -l) wheels ($(du -sh "$OUT" | cut -f1)) in build/wheelhouse in $((SECONDS - t0)) s${built:+; built here: ${built[*]}}"
