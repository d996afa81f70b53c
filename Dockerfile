# relay-review as a GitHub Docker container action (see action.yml).
#
# GitHub's rules for action images: no USER (the runner needs root to share /github/workspace),
# no WORKDIR (the runner sets it to /github/workspace), an exec-form ENTRYPOINT with an absolute
# path (the action's inputs arrive as INPUT_* environment variables, not as arguments).
#
# Dependencies come only from requirements.lock: exact versions with hashes (pip's hash-checking
# mode), the build backend (setuptools) included, so building the project fetches nothing
# unpinned. .ci/run repeats these two pip steps in a fresh virtual environment and starts
# `relay-review run` from it, since no Docker engine runs there.
FROM python:3.11.14-slim-bookworm

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
