"""What a run cost: requests let out per account and what a provider's key endpoint said of
it. A report read back from JSON is input, so only whole counts and key records are kept."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator


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


class DayCount(BaseModel):
    """An account's requests of the last 24 h, every run's, as the shared quota ledger counted
    them (a count of what went through the ledger, not the provider's), and its budget a day."""

    model_config = ConfigDict(defer_build=True)

    used: int = 0
    per_day: int = 0

    @field_validator("used", "per_day", mode="before")
    @classmethod
    def _count(cls, value: Any) -> int:
        """A report read back is input: anything but a whole count in range is 0."""
        ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 10_000_000
        return value if ok else 0

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
