# syntax=docker/dockerfile:1
#
# The bundle-operator image: one virtualenv, built from requirements.lock, that runs
#   - the operator (the default): `python -m bundle_operator` with the flags of `bundlectl operator run`,
#     e.g. `podman run IMAGE --namespace agents --platform-url http://platform:8080`;
#   - the reference platform, by its own command:
#     `podman run --entrypoint bundlectl IMAGE platform serve --host 0.0.0.0 --port 8080 --db /data/platform.db`
#     (in Kubernetes: command: [bundlectl], args: [platform, serve, --host, 0.0.0.0, ...]).
# Build: `make image` (buildah; where no registry is reachable, on a base from Debian's packages), or
# `docker build -t bundle-operator .`; docs/how-to/image.md says more.
#
# The base, in one place: python:3.11-slim-bookworm (CPython 3.11.16 on the Debian bookworm snapshot of
# 2026-08-24), pinned by the digest of its multi-platform OCI index, which names linux/amd64
# (python@sha256:2fc9207f64226cb05ac317cee0bab6fa55a9ea311ce5a086baddd4b4a83c2d3c) and linux/arm64/v8
# (python@sha256:139fa455f4fbf058a7fb28e184196829365da3a2d2cb1abb3f4f4426d524dbe4) among its platforms.
# The digest was read from the official images' published record (GitHub docker-library/repo-info,
# repos/python/remote/3.11-slim-bookworm.md), not pulled: the machine that wrote this reaches no
# container registry. Whoever can pull must check and refresh it, e.g.
#   skopeo inspect --raw docker://python:3.11-slim-bookworm | sha256sum
# and put the index digest here when Debian or Python ship fixes (the base.name label repeats it).
# Any other Python 3.11 base with `python` on PATH and the venv module works too: `make image-base`
# makes one from Debian's packages (BASE_IMAGE=localhost/python-base:bookworm) where no registry is
# reachable. Nothing of the base's own setuptools, wheel or pip cache is used for the build.
ARG BASE_IMAGE=python:3.11-slim-bookworm@sha256:0bee7276f83efd4a1ee05bbbf4281d95ed28e079220a9457f25a93e3f1e3c31b
FROM ${BASE_IMAGE} AS base
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

# Build stage: the venv from the lock, then the project's own wheel on top, with no dependency of its own.
FROM base AS build
# A CA bundle of the build machine's, for pip behind a TLS-inspecting proxy: `make image` hands the
# host's bundle to the two RUN steps that download (a build secret, mounted read-only for that step
# alone, so it never enters a layer) and names its path here; the final stage declares no such
# argument. Without it pip trusts its own CA bundle, as in any build.
ARG PIP_CERT
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore \
    PIP_NO_CACHE_DIR=1
WORKDIR /src
# The build tools (setuptools, wheel) come from their own hashed lock into a venv of their own, never
# from whatever the base ships: Debian bookworm's setuptools 66 cannot read pyproject.toml's license.
COPY requirements.lock requirements-build.lock ./
RUN --mount=type=secret,id=build-ca,target=/run/build-ca/ca.crt \
    python -m venv /opt/build-tools \
 && /opt/build-tools/bin/python -m pip install --require-hashes --no-deps --only-binary=:all: -r requirements-build.lock
# Hash-checked wheels only: every pin has cp311/abi3/py3 wheels for amd64 and arm64, so no compiler.
# The runtime venv gets no pip or setuptools of its own: the build tools' pip installs into it.
RUN --mount=type=secret,id=build-ca,target=/run/build-ca/ca.crt \
    python -m venv --without-pip /opt/venv \
 && /opt/build-tools/bin/python -m pip --python /opt/venv/bin/python install \
      --require-hashes --no-deps --only-binary=:all: -r requirements.lock
COPY pyproject.toml README.md ./
COPY operator/bundle_operator ./operator/bundle_operator
# The wheel is built offline by the pinned tools (no build isolation, so nothing is downloaded for
# it), installed with --no-deps from that file alone, and `pip check` proves that the lock holds
# everything the package needs.
RUN /opt/build-tools/bin/python -m pip wheel --no-deps --no-build-isolation --wheel-dir /wheels . \
 && /opt/build-tools/bin/python -m pip --python /opt/venv/bin/python install --no-deps --no-index /wheels/bundle_operator-*.whl \
 && /opt/build-tools/bin/python -m pip --python /opt/venv/bin/python check
# The runtime user by name as well as by number: Python's getpass (which kopf calls) and anything
# else that asks getpwuid() about uid 65532 gets an answer. The base's own entries are kept.
RUN mkdir -p /rootfs/data /rootfs/etc \
 && cp /etc/passwd /etc/group /rootfs/etc/ \
 && echo 'nonroot:x:65532:65532:bundle-operator:/tmp:/usr/sbin/nologin' >> /rootfs/etc/passwd \
 && echo 'nonroot:x:65532:' >> /rootfs/etc/group

# Final stage: the base plus the venv, nothing else (no compiler, no sources, no tests, no pip cache).
FROM base AS runtime
ARG BASE_IMAGE
LABEL org.opencontainers.image.title="bundle-operator" \
      org.opencontainers.image.description="Kubernetes operator that installs bundles of AI-agent configuration; also runs the reference platform (bundlectl platform serve)" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="${BASE_IMAGE}"
COPY --from=build /opt/venv /opt/venv
COPY --from=build /rootfs/etc/passwd /rootfs/etc/group /etc/
# A writable place for the reference platform's SQLite file (mount a volume here to keep it).
COPY --from=build --chown=65532:65532 /rootfs/data /data
# PYTHONSAFEPATH: `python -m` does not put the working directory on sys.path.
ENV PATH=/opt/venv/bin:$PATH \
    VIRTUAL_ENV=/opt/venv \
    PYTHONSAFEPATH=1 \
    HOME=/tmp
WORKDIR /data
# Numeric, so that Kubernetes' runAsNonRoot can check it; the Helm chart runs as this uid too.
USER 65532:65532
# Prometheus /metrics and the /healthz and /readyz probes of the default command.
EXPOSE 9090 8081
ENTRYPOINT ["python", "-m", "bundle_operator"]
CMD ["--all-namespaces", "--metrics-port", "9090", "--health-port", "8081"]
