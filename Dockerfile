# relay-review as a GitHub Docker container action (see action.yml).
#
# GitHub's rules for action images: no USER (the runner needs root to share /github/workspace),
# no WORKDIR (the runner sets it to /github/workspace), an exec-form ENTRYPOINT with an absolute
# path (the action's inputs arrive as INPUT_* environment variables, not as arguments).
#
# Dependencies come only from requirements.lock: exact versions with hashes (pip's hash-checking
# mode), the build backend (setuptools) included, so building the project fetches nothing
# unpinned. .ci/run builds this file with a real Docker engine (.ci/docker_ci.py: against a
# stand-in base built from Debian packages, passed as BASE_IMAGE, since Docker Hub is not
# reachable there) and runs the image as the runner does; where no engine can start it repeats
# the two pip steps in a fresh virtual environment (.ci/docker_repro.py).
#
# The base is pinned by tag and by digest (the multi-architecture index of the official image),
# so a re-pushed tag cannot change what is built; BASE_IMAGE overrides it (docker build
# --build-arg BASE_IMAGE=...), e.g. for a mirror or a locally built stand-in.
#
# Signals: the entrypoint is the console script itself (PID 1, exec form); relay-review installs
# SIGTERM/SIGINT handlers (src/relay_review/_signals.py), so `docker stop` ends it at once with
# one line and exit code 143 (130 for SIGINT), not after the 10 s SIGKILL grace.
ARG BASE_IMAGE=python:3.11.14-slim-bookworm@sha256:65a93d69fa75478d554f4ad27c85c1e69fa184956261b4301ebaf6dbb0a3543d
# hadolint ignore=DL3006
FROM ${BASE_IMAGE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

COPY requirements.lock /opt/relay-review/requirements.lock
RUN pip install --no-cache-dir --require-hashes -r /opt/relay-review/requirements.lock

COPY pyproject.toml README.md /opt/relay-review/
COPY src /opt/relay-review/src
RUN pip install --no-cache-dir --no-deps --no-build-isolation /opt/relay-review \
    && rm -rf /opt/relay-review

ENTRYPOINT ["/usr/local/bin/relay-review", "run"]
