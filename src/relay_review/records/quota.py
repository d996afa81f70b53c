"""What a run cost: requests let out per account and what a provider's key endpoint said of
it. A report read back from JSON is input, so only whole counts and key records are kept."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator


class KeyUsage(BaseModel):
    """What a provider's key endpoint said of one account (OpenRouter's ``GET /key``; credits in
    USD as published; ``free_per_day`` the documented free allowance when on the free tier)."""

    model_config = ConfigDict(defer_build=True)

    account: str = ""
    is_free_tier: bool | None = None
    usage_daily: float | None = None
    limit_remaining: float | None = None
    free_per_day: int | None = None

    @field_validator("free_per_day", mode="before")
    @classmethod
    def _whole_or_none(cls, value: Any) -> int | None:
        ok = isinstance(value, int) and not isinstance(value, bool) and value > 0
        return value if ok else None


#: The largest count a :class:`DayCount` holds (a budget above it is not one).
MAX_COUNT = 10_000_000


class DayCount(BaseModel):
    """An account's requests of the last 24 h, every run's, as the shared quota ledger counted
    them (a count of what went through the ledger, not the provider's), and its budget a day."""

    model_config = ConfigDict(defer_build=True)

    used: int = 0
    per_day: int = 0

    @field_validator("used", "per_day", mode="before")
    @classmethod
    def _count(cls, value: Any, info: ValidationInfo) -> int:
        """A store's or a report's number is input: anything but a whole count >= 0 is 0; a
        count of requests used above :data:`MAX_COUNT` is that (nothing left, never more)."""
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            return 0
        if value > MAX_COUNT:
            return MAX_COUNT if info.field_name == "used" else 0
        return value

    @property
    def left(self) -> int:
        return max(0, self.per_day - self.used)


class QuotaReport(BaseModel):
    """What a run cost: requests let out per account (probes included), the key facts read,
    the listing requests the published health took, and, with a shared ledger, every run's
    requests of each account with a daily budget (``shared_day``)."""

    model_config = ConfigDict(defer_build=True)

    requests_by_account: dict[str, int] = Field(default_factory=dict)
    keys: dict[str, KeyUsage] = Field(default_factory=dict)
    health_requests: int = 0
    shared_day: dict[str, DayCount] = Field(default_factory=dict)

    @field_validator("requests_by_account", mode="before")
    @classmethod
    def _counts_only(cls, value: Any) -> dict[str, int]:
        """A report read back is input: only whole counts >= 0 are kept (no bool, no text)."""
        if not isinstance(value, Mapping):
            return {}
        return {
            str(k): v
            for k, v in value.items()
            if isinstance(v, int) and not isinstance(v, bool) and v >= 0
        }

    @field_validator("keys", mode="before")
    @classmethod
    def _key_records_only(cls, value: Any) -> dict[str, Any]:
        if not isinstance(value, Mapping):
            return {}
        return {str(k): v for k, v in value.items() if isinstance(v, Mapping | KeyUsage)}

    @field_validator("shared_day", mode="before")
    @classmethod
    def _day_records_only(cls, value: Any) -> dict[str, Any]:
        if not isinstance(value, Mapping):
            return {}
        return {str(k): v for k, v in value.items() if isinstance(v, Mapping | DayCount)}
