"""The quota ledger under load (issue 14), against a real redis-server: 12 concurrent
``relay-review chat`` processes, two accounts with ``rpm = 4`` each, one shared Redis."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

from ledger_load import run_load
from redis_server import RedisServer
from relay_review.drill import FaultFleet


def test_twelve_processes_never_exceed_four_requests_per_account_per_minute(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    result = run_load(tmp_path, redis_server.url, processes=12, rpm=4, prefix="load12:")
    for account in ("alpha", "beta"):
        assert result.most_in_any_window(account) <= 4, result.received
    # every slot of the budget was used, and every process ended with a verdict on its fate
    assert result.served == 8, result.codes
    assert sorted(set(result.codes)) == [0, 1], result.codes
    for code, report, err in zip(result.codes, result.reports, result.stderr, strict=True):
        assert "Traceback" not in err, err
        assert report, err  # a JSON report on stdout either way
        if code == 1:
            details = " ".join(a["detail"] for a in report["attempts"])
            assert "account budget: per-minute limit" in details, report["attempts"]
        # nothing our runs sent was refused by the provider
        assert all(a["http_status"] != 429 for a in report["attempts"]), report["attempts"]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_redis_unreachable_the_runs_go_on_with_one_warning(tmp_path: Path) -> None:
    url = f"redis://127.0.0.1:{_closed_port()}/0"
    result = run_load(tmp_path, url, processes=2, rpm=4, prefix="gone:")
    assert result.codes == [0, 0], result.stderr
    for err, report in zip(result.stderr, result.reports, strict=True):
        assert "Traceback" not in err
        warnings = [line for line in err.splitlines() if "WARNING" in line]
        assert len(warnings) == 1 and "unavailable" in warnings[0], err  # one warning
        assert report["served_by"] is not None
    assert json.dumps(result.reports).count("account budget") == 0


def test_redis_stopped_mid_run_the_runs_complete_with_one_warning(tmp_path: Path) -> None:
    server = RedisServer(tmp_path / "redis")
    try:

        def stop_redis(fleet: FaultFleet) -> None:
            end = time.monotonic() + 30
            while sum(r.is_chat for r in fleet.requests) < 2 and time.monotonic() < end:
                time.sleep(0.05)  # until both runs reserved their slot and sent (2 s replies)
            server.stop()

        result = run_load(
            tmp_path,
            server.url,
            processes=2,
            rpm=4,
            prefix="stopped:",
            behaviour="healthy@2",
            while_running=stop_redis,
        )
    finally:
        server.stop()
    assert result.codes == [0, 0], result.stderr
    for err in result.stderr:
        assert "Traceback" not in err
        warnings = [line for line in err.splitlines() if "WARNING" in line]
        # memory was read and the slot reserved; Redis went away before the save
        assert len(warnings) == 1 and "while writing memory" in warnings[0], err
