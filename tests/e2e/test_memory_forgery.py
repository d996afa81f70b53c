"""A writer of the shared Redis without the state key cannot set a verdict (issue 20's tenant).

Every review-cache key is named from public inputs, so anyone holding the Redis password can
write one. Run 1 of the review drill (``relay-review drill --state redis://...``, its fleet on
one port so run 2 has the same routes) finds the sample diff's problems; a tenant then rewrites
the cached memos to hold no finding, or copies one under another key; run 2 must not approve,
and asks a model again for what was tampered with. Evidence: the decision, the attempts of the
JSON report, and the keys left in a real ``redis-server``.
"""

from __future__ import annotations

import json
import socket
import time
from typing import Any

import pytest
import redis

from cli_harness import run_cli
from redis_server import STATE_KEY, RedisServer
from relay_review.state import KEY_ENV

pytestmark = pytest.mark.integration

PREFIX = "relay-review:"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def drill(url: str, port: int, key: str | None = STATE_KEY) -> tuple[dict[str, Any], str]:
    env = {"PATH": "/usr/bin:/bin", "RELAY_DRILL_PORT": str(port)}
    if key is not None:
        env[KEY_ENV] = key
    run = run_cli("drill", "--state", url, "--format", "json", env=env)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout), run.stderr


def chat_requests(report: dict[str, Any]) -> int:
    return len(report["attempts"])


def chunk_keys(client: redis.Redis) -> list[bytes]:
    return sorted(client.scan_iter(f"{PREFIX}m:chunk:*"))


def clear_findings(client: redis.Redis, keep_signature: bool) -> int:
    """What the tenant of the session-12 audit did: every chunk memo emptied of its findings,
    ``at`` a minute ahead (inside the clock skew) so it looks newest; with ``keep_signature``
    the run's signature is left in front of the changed bytes."""
    n = 0
    for key in chunk_keys(client):
        memo = json.loads(client.get(key))
        memo["findings"] = []
        memo["summary"] = "Reviewed; nothing to report."
        memo["at"] = time.time() + 60
        if not keep_signature:
            memo.pop("sig", None)
        client.set(key, json.dumps(memo), px=client.pttl(key))
        n += 1
    return n


def test_a_run_with_the_state_key_reuses_its_own_signed_review(
    redis_server: RedisServer, redis_client: redis.Redis
) -> None:
    port = free_port()
    first, _ = drill(redis_server.url, port)
    assert first["decision"] == "request_changes" and first["findings"]
    assert all(redis_client.get(k).startswith(b'{"sig":"') for k in chunk_keys(redis_client))
    second, _ = drill(redis_server.url, port)
    assert second["decision"] == first["decision"]
    assert len(second["findings"]) == len(first["findings"])
    assert chat_requests(second) == 0 and second["memory"]["reused_files"] >= 1


@pytest.mark.parametrize("keep_signature", [False, True], ids=["unsigned", "old-signature"])
def test_a_tenant_who_empties_the_cached_findings_gets_no_approve(
    redis_server: RedisServer, redis_client: redis.Redis, keep_signature: bool
) -> None:
    port = free_port()
    first, _ = drill(redis_server.url, port)
    assert first["decision"] == "request_changes"
    assert clear_findings(redis_client, keep_signature) >= 2
    second, stderr = drill(redis_server.url, port)
    assert second["decision"] == "request_changes"
    assert len(second["findings"]) == len(first["findings"])
    assert chat_requests(second) >= 1  # asked again: nothing reused from a forged memo
    assert second["memory"]["reused_files"] == 0
    warnings = [line for line in stderr.splitlines() if line.startswith("WARNING")]
    assert len(warnings) == 1 and "not signed with this setup's state key" in warnings[0]
    # run 2 deleted the forgeries it read (their time looked newest) and wrote its own signed
    # review in their place: run 3 reuses that, never the forgery
    third, _ = drill(redis_server.url, port)
    assert third["decision"] == "request_changes" and chat_requests(third) == 0
    assert len(third["findings"]) == len(first["findings"])


def test_a_signed_memo_copied_under_another_key_is_refused(
    redis_server: RedisServer, redis_client: redis.Redis
) -> None:
    """A tenant cannot move a clean signed memo (another file's, another pull request's) onto
    the key of a file that has findings: the signature names the key it was made for."""
    port = free_port()
    drill(redis_server.url, port)
    keys = chunk_keys(redis_client)
    values = {k: redis_client.get(k) for k in keys}
    clean = [k for k in keys if not json.loads(values[k]).get("findings")]
    assert clean and len(clean) < len(keys)
    for key in keys:
        redis_client.set(key, values[clean[0]], px=redis_client.pttl(key))
    second, stderr = drill(redis_server.url, port)
    assert second["decision"] == "request_changes" and chat_requests(second) >= 1
    assert "not signed with this setup's state key" in stderr


def test_without_a_state_key_no_review_memory_is_kept_or_read(
    redis_server: RedisServer, redis_client: redis.Redis
) -> None:
    """No key: the Redis keeps route memory and the ledger only; a forged memo under the very
    key a run would read is never read; the log and the report say why nothing was reused."""
    port = free_port()
    first, stderr = drill(redis_server.url, port, key=None)
    assert "no state key, so the review cache and findings' states are not kept" in stderr
    assert "WARNING" not in stderr
    names = {k.decode() for k in redis_client.scan_iter(f"{PREFIX}*")}
    assert any(n.startswith(f"{PREFIX}m:route:") for n in names)
    assert not [n for n in names if n.startswith((f"{PREFIX}m:chunk:", f"{PREFIX}m:latest:"))]
    # the keys a keyed run writes for this diff, forged clean and unsigned
    keyed, _ = drill(redis_server.url, port)
    assert keyed["decision"] == "request_changes"
    assert clear_findings(redis_client, keep_signature=False) >= 2
    second, _ = drill(redis_server.url, port, key=None)
    assert second["decision"] == first["decision"] == "request_changes"
    assert chat_requests(second) >= 1 and second["memory"]["reused_files"] == 0
    assert "no state key" in second["memory"]["not_reused"]


def test_a_short_state_key_is_refused_naming_the_variable(redis_server: RedisServer) -> None:
    env = {"PATH": "/usr/bin:/bin", KEY_ENV: "hunter2-short"}
    run = run_cli("drill", "--state", redis_server.url, env=env)
    assert run.returncode == 2
    assert KEY_ENV in run.stderr and "at least 16" in run.stderr
    assert "hunter2-short" not in run.stderr + run.stdout
