# netstack's container image: the daemons and the `netstack` CLI in a venv (/opt/netstack) on
# Debian bookworm. Build it with scripts/docker/build-image.sh (it works offline: it prepares the
# base image and build/wheelhouse first); nothing here reaches PyPI, everything Python comes from
# build/wheelhouse (scripts/docker/wheelhouse.sh).
#
# Layers and caching (what invalidates what):
#   - the base image (a registry's debian:bookworm-slim, or netstack/base:bookworm from debootstrap:
#     --build-arg BASE=...) and the system-package step;
#   - stage "deps": a venv with ALL runtime dependencies, installed from build/wheelhouse alone.
#     It depends on the wheelhouse only (its requirements.txt + wheels), never on netstack's
#     source, so editing netstack/ does not reinstall numpy & co; a changed dependency list in
#     pyproject.toml changes the wheelhouse and rebuilds from here;
#   - stage "wheel": netstack's own wheel, built from pyproject.toml, README.md and the three
#     packages (the only steps that editing the source reruns, together with the last RUN below);
#   - the final stage copies the venv from "deps" (cached as long as "deps" is) and installs the
#     wheel from "wheel" into it (small layer).
# The wheelhouse (~60 MB of wheels) never reaches the final image: it only lives in the
# intermediate stages. (Deleting /wheelhouse in a single-stage build would not shrink anything,
# since the COPY layer stays; the classic builder has no RUN --mount to avoid that layer.)
ARG BASE=debian:bookworm-slim

FROM ${BASE} AS base
# what netstack needs at run time; the registry's slim image lacks it all, our debootstrap base
# (scripts/docker/base-image.sh) has it already and then this does nothing
RUN set -eu; \
    if command -v python3 >/dev/null && python3 -c 'import venv, ensurepip' 2>/dev/null \
       && command -v ip >/dev/null && command -v nft >/dev/null && command -v ping >/dev/null \
       && command -v ps >/dev/null; then \
        echo "system packages present"; \
    else \
        apt-get update -qq \
        && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            python3 python3-venv iproute2 nftables iputils-ping procps >/dev/null \
        && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin; \
    fi

FROM base AS deps
RUN python3 -m venv /opt/netstack
COPY build/wheelhouse /wheelhouse
RUN /opt/netstack/bin/pip install --quiet --disable-pip-version-check --no-cache-dir \
        --no-index --find-links /wheelhouse -r /wheelhouse/requirements.txt

FROM deps AS wheel
COPY pyproject.toml README.md /src/
COPY headers /src/headers
COPY daemons /src/daemons
COPY netstack /src/netstack
# setuptools and wheel for the isolated build environment come from the wheelhouse as well.
# SOURCE_DATE_EPOCH makes the wheel byte-identical for identical source (fixed zip timestamps),
# so that even when this stage's cache is gone (e.g. `docker image prune` removed the dangling
# image it leaves), the final stage's COPY --from=wheel still hits its cache: same image ID.
RUN SOURCE_DATE_EPOCH=315532800 /opt/netstack/bin/pip wheel --quiet --disable-pip-version-check --no-cache-dir \
        --no-index --find-links /wheelhouse --no-deps --wheel-dir /dist /src

FROM base
COPY --from=deps /opt/netstack /opt/netstack
COPY --from=wheel /dist /tmp/dist
RUN /opt/netstack/bin/pip install --quiet --disable-pip-version-check --no-cache-dir \
        --no-index --no-deps /tmp/dist/netstack-*.whl \
    && rm -rf /tmp/dist \
    && /opt/netstack/bin/pip check
ENV PATH=/opt/netstack/bin:$PATH PYTHONUNBUFFERED=1
WORKDIR /opt/netstack
ARG BASE
ARG NETSTACK_VERSION=unknown
LABEL org.opencontainers.image.title="netstack" \
      org.opencontainers.image.description="Datacenter-networking research systems (LinkGuardian, 1Pipe, TCD, DTA, T/C-SACK) as userspace daemons" \
      org.opencontainers.image.version="${NETSTACK_VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="${BASE}"
STOPSIGNAL SIGTERM
ENTRYPOINT ["netstack", "node", "run"]
