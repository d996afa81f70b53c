"""What ``relay-review chat`` and ``preflight`` load before their first request (issue 25's
start-up goal).

The path to the first request is the imports, the policy, the discovery report, the catalog and
the memory: the review stages, the renderer, the report's and the action's records, the action's
inputs, live discovery, the quota records, PyGithub, redis-py, the TOML parser (no policy file),
httpx's command-line client (click, rich, pygments, whenever they are installed) and pydantic's
plugin lookup are no part of it. ``bench/startup.py`` times that path; this test pins what it
loads (no timing).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from relay_review.drill.scenarios import Scenario, discovery_for, drill_environ, fleet_for

pytestmark = pytest.mark.integration

SCENARIO = Scenario("startup", "one healthy route", {"solo": {"vendor/model": "healthy"}})

#: Run as the program runs (``cli.main()`` over ``sys.argv``); at the first connect, write the
#: modules loaded then and whether the command's imports were frozen out of collection.
PROBE = textwrap.dedent(
    """
    import gc, json, sys
    out, seen = sys.argv[1], []

    def at_first_connect(event, args):
        if event == "socket.connect" and not seen:
            loaded = sorted(m for m, mod in sys.modules.items() if mod is not None)
            seen.append(1)
            loader = sys.modules.get("pydantic.plugin._loader")
            scanned = loader is not None and loader._plugins is not None
            from pydantic import BaseModel
            models, built = [BaseModel], []
            while models:
                model = models.pop()
                models.extend(model.__subclasses__())
                if model.__module__.startswith("relay_review.") and model.__pydantic_complete__:
                    built.append(model.__name__)
            with open(out, "w") as f:
                json.dump({"modules": loaded, "frozen": gc.get_freeze_count(),
                           "plugins_scanned": scanned, "validators": sorted(built)}, f)

    sys.addaudithook(at_first_connect)
    sys.argv = ["relay-review", *sys.argv[2:]]
    from relay_review.cli import main

    raise SystemExit(main())
    """
)

#: The records whose validator may be built before the first request (building one is pydantic's
#: schema work, a few per cent of the start-up each): what reads input (the discovery report's
#: routes, the stored route memos), the catalog, a route's probe and the deadlines.
VALIDATED_BEFORE_THE_FIRST_REQUEST = {
    "Route",
    "RouteMemo",
    "CatalogEntry",
    "CatalogReport",
    "Catalog",
    "Probe",
    "Deadlines",
}

#: Module names (and their submodules) that must not load before the first request.
NOT_BEFORE_THE_FIRST_REQUEST = (
    "relay_review.render",
    "relay_review.records.report",  # the run's report: built after the reply
    "relay_review.records.action",
    "relay_review.records.finding",
    "relay_review.review",
    "relay_review.pipeline.review",
    "relay_review.pipeline.publish",
    "relay_review.github.client",
    "relay_review.config.inputs",  # the action's inputs
    "relay_review.providers.discovery",  # live discovery: the command reads a discovery file
    "relay_review.records.discovery",
    "relay_review.records.quota",  # what the run cost: counted after the reply
    "github",  # PyGithub
    "redis",
    "unidiff",
    "tomllib",
    "click",
    "rich",
    "pygments",
)


@pytest.mark.parametrize(
    "command", [["chat", "--message", "hi"], ["preflight"]], ids=["chat", "preflight"]
)
def test_a_command_loads_only_its_path_before_the_first_request(
    tmp_path: Path, command: list[str]
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RELAY_REVIEW_")}
    env.update(drill_environ(SCENARIO))
    with fleet_for(SCENARIO) as fleet:
        discovery = tmp_path / "discovery.json"
        discovery.write_text(json.dumps(discovery_for(SCENARIO, fleet)))
        out = tmp_path / "loaded.json"
        args = [*command, "--discovery", str(discovery), "--format", "json"]
        args += ["--state", str(tmp_path / "st.json")]
        for program in (["-m", "relay_review"], ["-c", PROBE, str(out)]):  # the first writes memory
            proc = subprocess.run(
                [sys.executable, *program, *args],
                capture_output=True,
                text=True,
                env=env,
                cwd=tmp_path,
                timeout=120,
            )
            assert proc.returncode == 0, proc.stderr
        assert [r for r in fleet.requests if r.is_chat], "a chat request reached the fleet"
    loaded = json.loads(out.read_text())
    early = [
        m
        for m in loaded["modules"]
        for name in NOT_BEFORE_THE_FIRST_REQUEST
        if m == name or m.startswith(name + ".")
    ]
    assert early == [], f"loaded before the first request: {early}"
    assert "relay_review.pipeline.routes" in loaded["modules"]  # the probe saw the command's path
    assert loaded["frozen"] > 0, "the command's imports were not frozen out of collection"
    # pydantic's plugin lookup reads every installed package's metadata; relay-review has none
    assert not loaded["plugins_scanned"], "pydantic looked for plugins (entry points)"
    validators = set(loaded["validators"])
    assert "Route" in validators  # the discovery report was read, and validated
    if command[0] == "chat":  # the route that served is remembered: the second run reads it
        assert "RouteMemo" in validators
    assert validators <= VALIDATED_BEFORE_THE_FIRST_REQUEST, "a validator built before the request"
