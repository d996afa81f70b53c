"""Routes and the catalog: one (account, model) pair as discovery finds it (:class:`Route`),
the catalog's ranked selection of them (:class:`Catalog`, :class:`CatalogEntry`) and how reports
show that selection (:class:`CatalogSummary`, :class:`SelectedRoute`)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from relay_review.records.serving import ServedBy


class Cost(StrEnum):
    """Price evidence for a route, decided only from numbers (never from a ``:free`` suffix)."""

    FREE = "free"
    PRICED = "priced"
    UNKNOWN = "unknown"

    @classmethod
    def of(cls, prompt: float | None, completion: float | None) -> Cost:
        """Both prices 0 -> free; both numbers, any > 0 -> priced; both absent -> unknown."""
        if prompt is None and completion is None:
            return cls.UNKNOWN
        if prompt is None or completion is None:
            raise ValueError("exactly one price present")
        return cls.FREE if prompt == 0 and completion == 0 else cls.PRICED


#: Declared structured-output support a route may carry (anything else is ignored).
RESPONSE_FORMATS = ("json_schema", "json_object")


class Route(BaseModel):
    """One (account, model) pair: built by discovery in process, or read back from a discovery
    report file (:func:`relay_review.routing.catalog.parse_discovery`), defaults filled in."""

    model_config = ConfigDict(defer_build=True, frozen=True)

    index: int = Field(description="position in the discovery report (for error messages)")
    account: str
    provider: str
    model: str
    agent_id: str
    base_url: str | None = None
    api_key_env: str
    prompt_price_per_1k: float | None = None
    completion_price_per_1k: float | None = None
    context_length: int | None = None
    cost: Cost = Cost.UNKNOWN
    response_format: str | None = Field(
        None, description="structured output the route declares: json_schema, json_object or None"
    )
    price_note: str | None = Field(None, description="why discovery found no price (unknown)")

    def report_json(self) -> dict[str, Any]:
        """The route as the discovery report file holds it (what ``discover`` writes)."""
        out: dict[str, Any] = {
            "account": self.account,
            "provider": self.provider,
            "model": self.model,
            "agent_id": self.agent_id,
            "base_url": self.base_url,
            "api_key_env": self.api_key_env,
            "prompt_price_per_1k": self.prompt_price_per_1k,
            "completion_price_per_1k": self.completion_price_per_1k,
            "context_length": self.context_length,
        }
        if self.price_note is not None:
            out["price_note"] = self.price_note
        if self.response_format is not None:
            out["response_format"] = self.response_format
        return out


class CatalogEntry(BaseModel):
    """A selected route with its tier facts and its unique priority (higher is tried first)."""

    model_config = ConfigDict(defer_build=True, frozen=True)

    route: Route
    cost: Cost
    zdr: bool
    priority: int
    #: The route's published uptime in percent (OpenRouter's endpoints listing), if read.
    uptime: float | None = None

    @property
    def agent_id(self) -> str:
        return self.route.agent_id

    @property
    def account(self) -> str:
        return self.route.account

    def summary(self) -> SelectedRoute:
        """This entry as reports show it (the contract's JSON shape for one selected route)."""
        r = self.route
        return SelectedRoute(
            agent_id=r.agent_id,
            account=r.account,
            provider=r.provider,
            model=r.model,
            cost=self.cost.value,
            zdr=self.zdr,
            priority=self.priority,
            uptime=self.uptime,
        )

    @property
    def served_by(self) -> ServedBy:
        """This entry's route as a report names the one that served."""
        return ServedBy(agent_id=self.agent_id, account=self.account, model=self.route.model)


class CatalogReport(BaseModel):
    """Counts that explain a selection."""

    model_config = ConfigDict(defer_build=True)

    total_routes: int = 0
    free_routes: int = 0
    priced_routes: int = 0
    unknown_routes: int = 0
    account_diversity: int = 0
    selected_by_account: dict[str, int] = Field(default_factory=dict)
    zdr_selected: int = 0
    excluded: dict[str, int] = Field(default_factory=dict)


class SelectedRoute(BaseModel):
    """A catalog route as reports show it (:meth:`CatalogEntry.summary`): flat, no key names."""

    model_config = ConfigDict(defer_build=True)

    agent_id: str
    account: str = ""
    provider: str = ""
    model: str = ""
    cost: str = ""
    zdr: bool = False
    priority: int = 0
    #: Published uptime in percent, only where it was read (left out of the JSON otherwise).
    uptime: float | None = None

    @model_serializer(mode="wrap")
    def _drop_unread_uptime(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        if out.get("uptime", 0) is None:
            del out["uptime"]
        return out


class CatalogSummary(BaseModel):
    """The catalog as reports hold it (:meth:`Catalog.summary`)."""

    model_config = ConfigDict(defer_build=True)

    selected: list[SelectedRoute] = Field(default_factory=list)
    report: CatalogReport | None = None


class Catalog(BaseModel):
    """The bounded, ranked list of routes a run may use, and how it was chosen."""

    model_config = ConfigDict(defer_build=True)

    selected: list[CatalogEntry]
    report: CatalogReport

    def summary(self) -> CatalogSummary:
        """The catalog as reports hold it."""
        return CatalogSummary(selected=[e.summary() for e in self.selected], report=self.report)

    def to_json(self) -> dict[str, Any]:
        return self.summary().model_dump(mode="json")
