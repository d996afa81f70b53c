"""The quota ledger under load and under faults, and the memory load at org scale, against real
redis-servers (Debian's package, started here on free ports).

- default: N concurrent ``relay-review chat`` processes over two accounts with ``rpm`` each,
  sharing one Redis: requests sent vs. budget, the most in any 60 s window, served runs;
- ``--fault kill|stop|restart|latency|all``: the same with Redis killed, stopped (SIGSTOP) or
  restarted empty once the first requests went out, or 0.8 s added to every reply: requests per
  account per window against ``rpm``;
- ``--hungry``: runs that each want more than the budget (ledger calls in one process, one
  store and ledger per run): granted per window against ``rpm`` for each fault (and Redis
  killed before any run starts), at ``[state] offline_share`` 1 (the old behaviour) and 0.25;
- ``--scale``: 50 concurrent runs (commands, connections and bytes per run from ``INFO``
  deltas, p50/p95 run time, requests per window vs ``rpm``), then one run's memory load with
  10,000 chunk memos and 200,000 unrelated keys in the database (time, commands, and through a
  50 ms-per-reply proxy: round trips).

Run: ``python bench/ledger_load.py [--processes 12] [--rpm 4] [--fault all] [--hungry]
[--scale]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests" / "support"))

import redis  # noqa: E402

from delay_proxy import DelayProxy  # noqa: E402
from ledger_load import LoadResult, run_load  # noqa: E402
from redis_server import RedisServer  # noqa: E402
from relay_review.state import Wanted  # noqa: E402
from relay_review.state.memory import ChunkMemo, Memory, RouteMemo  # noqa: E402
from relay_review.state.redis_store import RedisStore  # noqa: E402
from relay_review.state.seal import Seal  # noqa: E402

#: A state key, so the chunk memos are signed and read as a keyed setup reads them.
SEAL = Seal("bench-state-key-0123456789abcdef")

FAULTS = ("kill", "stop", "restart", "latency")


def windows(result: LoadResult, rpm: int) -> str:
    parts = []
    for account in sorted(result.received):
        most = result.most_in_any_window(account)
        parts.append(f"{account} {most}/{rpm} (ratio {most / rpm:.2f})")
    return ", ".join(parts)


def warned(result: LoadResult) -> int:
    return sum(1 for err in result.stderr if "WARNING" in err)


def after_first_requests(action: Callable[[], None]) -> Callable[[Any], None]:
    def run(fleet: Any) -> None:
        end = time.monotonic() + 30
        while sum(r.is_chat for r in fleet.requests) < 2 and time.monotonic() < end:
            time.sleep(0.02)
        action()

    return run


def fault_run(
    tmp: Path, fault: str, processes: int, rpm: int, deadline: float, timeout: float
) -> LoadResult:
    server = RedisServer(tmp / f"redis-{fault}")
    extra = f"[state]\ntimeout_s = {timeout}\n"
    try:
        if fault == "latency":
            with DelayProxy(("127.0.0.1", server.port), low=0.8, high=0.8) as proxy:
                return run_load(
                    tmp,
                    proxy.url,
                    processes=processes,
                    rpm=rpm,
                    deadline=deadline,
                    prefix="f:",
                    policy_extra=extra,
                )
        action = {"kill": server.kill, "stop": server.pause, "restart": server.restart}[fault]
        return run_load(
            tmp,
            server.url,
            processes=processes,
            rpm=rpm,
            deadline=deadline,
            prefix="f:",
            while_running=after_first_requests(action),
            policy_extra=extra,
        )
    finally:
        server.stop()


def hungry(tmp: Path, fault: str, runs: int, rpm: int, share: float, timeout: float) -> int:
    """``runs`` runs in this process (each its own store and ledger, as separate processes
    have), each wanting ``rpm + 2`` requests on one account, a request every 0.2 s; the fault
    once the runs' first requests were reserved (``blind``: Redis killed before any run
    starts). Returns the most requests granted in any 60 s (all within one window here)."""
    import asyncio

    from relay_review.records import CatalogEntry, Cost, Route
    from relay_review.routing.budget import AccountBudgets
    from relay_review.state.ledger import Budget

    server = RedisServer(tmp / f"redis-hungry-{fault}-{share}")
    route = Route(
        index=0,
        account="acct",
        provider="openai_compatible",
        model="m",
        agent_id="acct/m",
        base_url="http://127.0.0.1:9/v1",
        api_key_env="NONE",
    )
    entry = CatalogEntry(route=route, cost=Cost.PRICED, zdr=False, priority=1)

    async def one(url: str) -> int:
        ledger = RedisStore(url, prefix="h:", timeout=timeout).ledger
        budgets = AccountBudgets(ledger, {"acct": Budget(rpm=rpm)}, timeout=timeout, share=share)
        granted = 0
        for _ in range(rpm + 2):
            granted += await budgets.admit(entry, 30.0) is None
            await asyncio.sleep(0.2)
        return granted

    async def fleet(url: str) -> int:
        tasks = [asyncio.create_task(one(url)) for _ in range(runs)]
        await asyncio.sleep(0.3)  # every run has reserved once
        if fault != "latency":
            await asyncio.to_thread(
                {"kill": server.kill, "stop": server.pause, "restart": server.restart}.get(
                    fault, lambda: None
                )
            )
        return sum(await asyncio.gather(*tasks))

    try:
        if fault == "blind":
            server.kill()
        if fault == "latency":
            with DelayProxy(("127.0.0.1", server.port), low=0.8, high=0.8) as proxy:
                return asyncio.run(fleet(proxy.url))
        return asyncio.run(fleet(server.url))
    finally:
        server.stop()


def stats(server: RedisServer) -> dict[str, int]:
    with redis.Redis.from_url(server.url) as client:
        info = client.info()
        calls = sum(int(v["calls"]) for v in client.info("commandstats").values())
    return {
        "commands": calls,
        "connections": int(info["total_connections_received"]),
        "bytes": int(info["total_net_input_bytes"]) + int(info["total_net_output_bytes"]),
    }


def scale(tmp: Path, rpm: int) -> None:
    server = RedisServer(tmp / "redis-scale")
    try:
        before = stats(server)
        result = run_load(tmp, server.url, processes=50, rpm=rpm, deadline=8.0, prefix="s:")
        after = stats(server)
    finally:
        server.stop()
    runs = len(result.codes)
    times = sorted(float(r.get("elapsed_s") or 0) for r in result.reports if r)
    # the stats client's own INFO calls are 2 commands and 1 connection: not the runs'
    per = {k: (after[k] - before[k] - (2 if k == "commands" else 0)) / runs for k in after}
    p95 = times[min(len(times) - 1, int(0.95 * len(times)))] if times else 0.0
    print(f"50 runs at once, 2 accounts x rpm {rpm}, one Redis")
    print(
        f"  per run: {per['commands']:.1f} commands, {per['connections']:.1f} connections, "
        f"{per['bytes'] / 1024:.1f} KB"
    )
    print(
        f"  run time p50 {statistics.median(times):.2f} s, p95 {p95:.2f} s; "
        f"served {result.served}, most in any 60 s: {windows(result, rpm)}"
    )
    memory_load(tmp)


def memory_load(tmp: Path) -> None:
    server = RedisServer(tmp / "redis-memory")
    try:
        with redis.Redis.from_url(server.url) as client, client.pipeline(False) as pipe:
            for i in range(200_000):
                pipe.set(f"unrelated:{i}", "x")
                if i % 10_000 == 9_999:
                    pipe.execute()
            pipe.execute()
        now = time.time()
        route = RouteMemo(state="proven", outcome="ok", at=now, until=now + 3600)
        chunk = ChunkMemo(head="abc", route="acct/m", at=now, until=now + 3600)
        memory = Memory(
            routes={f"acct{i % 5}/model{i}": route for i in range(50)},
            accounts={f"acct{i}": route for i in range(5)},
            chunks={f"{i:032x}": chunk for i in range(10_000)},
        )
        RedisStore(server.url, prefix="org:", seal=SEAL).save(memory)
        wanted = Wanted.of(memory.routes, memory.accounts, [f"{i:032x}" for i in range(0, 40, 2)])
        before = stats(server)
        started = time.perf_counter()
        loaded = RedisStore(server.url, prefix="org:", seal=SEAL).load(None, wanted)
        local = time.perf_counter() - started
        after = stats(server)
        with DelayProxy(("127.0.0.1", server.port), low=0.05, high=0.05) as proxy:
            started = time.perf_counter()
            far = RedisStore(proxy.url, prefix="org:", seal=SEAL).load(None, wanted)
            remote = time.perf_counter() - started
            replies = proxy.replies
    finally:
        server.stop()
    complete = len(loaded.routes) == 50 and len(far.routes) == 50 and len(loaded.chunks) == 20
    print("memory load: 10,000 chunk memos + 200,000 unrelated keys; the run needs 50 routes,")
    print("  5 accounts and 20 chunks")
    print(
        f"  local: {local * 1000:.1f} ms, {after['commands'] - before['commands'] - 2} commands; "
        f"route memory complete: {complete}"
    )
    print(
        f"  at 50 ms per reply: {remote:.2f} s, {replies} delayed replies "
        f"(about {remote / 0.05:.0f} round trips)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=12)
    parser.add_argument("--rpm", type=int, default=4)
    parser.add_argument("--deadline", type=float, default=8.0)
    parser.add_argument("--fault", choices=[*FAULTS, "all"], default=None)
    parser.add_argument("--scale", action="store_true")
    parser.add_argument("--timeout", type=float, default=1.0, help="[state] timeout_s")
    parser.add_argument(
        "--hungry",
        action="store_true",
        help="runs that each want more than the budget (in one process), for each fault, at "
        "offline_share 1 (a whole window per run: the old behaviour) and the default 0.25",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        if args.hungry:
            print(
                f"{args.processes} runs each wanting {args.rpm + 2} requests of one account at "
                f"rpm {args.rpm}, timeout_s {args.timeout}: granted in the window"
            )
            for fault in ("blind", *FAULTS):
                got = [
                    hungry(tmp, fault, args.processes, args.rpm, share, args.timeout)
                    for share in (1.0, 0.25)
                ]
                print(
                    f"  {fault:8s} offline_share 1: {got[0]}/{args.rpm}, "
                    f"offline_share 0.25: {got[1]}/{args.rpm}"
                )
            return 0
        if args.scale:
            scale(tmp, args.rpm)
            return 0
        if args.fault:
            for fault in FAULTS if args.fault == "all" else (args.fault,):
                result = fault_run(
                    tmp, fault, args.processes, args.rpm, args.deadline, args.timeout
                )
                most = windows(result, args.rpm)
                print(
                    f"{fault:8s} {args.processes} runs, timeout_s {args.timeout}: "
                    f"most in any 60 s {most}; "
                    f"served {result.served}, warned {warned(result)}, "
                    f"crashed {sum(1 for e in result.stderr if 'Traceback' in e)}"
                )
            return 0
        server = RedisServer(tmp / "redis")
        try:
            result = run_load(
                tmp,
                server.url,
                processes=args.processes,
                rpm=args.rpm,
                deadline=args.deadline,
                prefix="bench:",
            )
        finally:
            server.stop()
    print(f"{args.processes} runs at once, 2 accounts x rpm {args.rpm}, one Redis")
    for account, times in result.received.items():
        most = result.most_in_any_window(account)
        print(
            f"  {account}: {len(times)} requests sent, budget {args.rpm}/min, "
            f"most in any 60 s: {most} (ratio {most / args.rpm:.2f})"
        )
    refused = sum(1 for c in result.codes if c == 1)
    print(
        f"  served runs: {result.served}, refused by the budget: {refused}, other: "
        f"{len(result.codes) - result.served - refused}"
    )
    print(
        f"  wall {result.wall_s:.1f} s: {result.served} runs served within one minute "
        f"(the budget allows {2 * args.rpm} per minute: ratio {result.served / (2 * args.rpm):.2f})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
