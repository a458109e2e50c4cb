# syntax=docker/dockerfile:1
# One image for every dxts component; the Helm chart chooses the component by its command
# (dxts-definition, dxts-execution, dxts-accounting, dxts-dispatcher, dxts-backend-local,
# dxts-backend-null, dxts-backend-slurm, dxts-db, dxts).
#
#   docker build -t dxts:0.1.0 .
#
# The build stage turns dxts and every dependency into wheels; the final stage installs those
# wheels offline, so no compiler, pip cache or source tree reaches the image.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN apt-get update \
 && apt-get install --yes --no-install-recommends build-essential \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN pip wheel --wheel-dir /wheels .

FROM ${PYTHON_IMAGE}
# The UID the chart's securityContext names (runAsUser/runAsGroup/fsGroup: 10001).
ARG DXTS_UID=10001
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HOME=/var/lib/dxts \
    TMPDIR=/tmp
# nodejs evaluates CWL JavaScript expressions for cwltool (the local backend adaptor), which
# runs each job in a bubblewrap sandbox (docs/security.md, "Jobs in a box"); the Slurm client
# tools and munge are the Slurm adaptor's way to its cluster.
RUN apt-get update \
 && apt-get install --yes --no-install-recommends nodejs bubblewrap slurm-client munge \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid "${DXTS_UID}" dxts \
 && useradd --uid "${DXTS_UID}" --gid "${DXTS_UID}" --home-dir /var/lib/dxts --create-home \
        --shell /usr/sbin/nologin dxts
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-index --find-links /wheels dxts \
 && for command in dxts dxts-db dxts-definition dxts-execution dxts-accounting \
        dxts-dispatcher dxts-backend-local dxts-backend-null dxts-backend-slurm cwltool node \
        sbatch munged; do \
        command -v "$command" >/dev/null || { echo "missing $command" >&2; exit 1; }; \
    done
USER ${DXTS_UID}:${DXTS_UID}
WORKDIR /var/lib/dxts
# gRPC and Prometheus ports the chart uses by default.
EXPOSE 50051 9090
CMD ["dxts", "--help"]
