# syntax=docker/dockerfile:1
#
# The Arena image: one image for the API server, the league manager and every Ray node,
# because all nodes of a Ray cluster must run the same Python, the same Ray and the same
# Arena code (actors are Arena classes).
#
#   CPU (default)  docker build -t arena .
#   CUDA           docker build -t arena:cuda --build-arg TORCH_INDEX_URL=https://pypi.org/simple .
#
# PyPI's Linux x86_64 torch wheel is the CUDA build and bundles the CUDA runtime, so the
# CUDA variant needs no CUDA base image: the host needs only the NVIDIA driver and the
# NVIDIA Container Toolkit. docker-compose.yml builds both variants (see docs/deployment.md).

ARG PYTHON_IMAGE=python:3.11-slim

# ---------------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS build

# Keep TORCH_VERSION equal to the torch pin in pyproject.toml (tests/deploy checks it).
ARG TORCH_VERSION=2.13.0
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/venv/bin:$PATH

RUN python -m venv /opt/venv && pip install --upgrade pip

# torch first, from the chosen index: the largest layer, cached across source changes.
RUN pip install "torch==${TORCH_VERSION}" --index-url "${TORCH_INDEX_URL}"

# Then Arena and the rest of its dependencies. The torch installed above satisfies the
# `torch==X` pin (a local version such as X+cpu matches ==X), so pip keeps it.
COPY pyproject.toml README.md /src/
COPY arena /src/arena
COPY agents /src/agents
COPY envs /src/envs
COPY league /src/league
RUN pip install /src && pip check

# ---------------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS runtime

LABEL org.opencontainers.image.title="arena" \
      org.opencontainers.image.description="Multi-agent self-play arena: API, web UI, ladders, Ray workers"

ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    ARENA_DATA_DIR=/data \
    ARENA_HOST=0.0.0.0

# A fixed uid, so a bind-mounted data dir can be chowned to it on the host.
RUN groupadd --system --gid 10001 arena \
    && useradd --system --uid 10001 --gid arena --create-home --home-dir /home/arena arena \
    && mkdir -p /data \
    && chown arena:arena /data

COPY --from=build /opt/venv /opt/venv

USER arena
WORKDIR /home/arena

# Everything the service writes: snapshots' durable copies (and the SQLite file and the
# embedded Redis when no database/Redis URL is configured).
VOLUME ["/data"]

EXPOSE 8000

# The image's own check is the API's; compose overrides it for Ray nodes and the league.
HEALTHCHECK --interval=30s --timeout=5s --start-period=90s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/api/v1/health' % os.environ.get('ARENA_PORT', '8000'), timeout=4)"]

ENTRYPOINT ["arena"]
CMD ["serve"]
