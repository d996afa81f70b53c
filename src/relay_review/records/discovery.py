"""How discovery went: per account, and the sources it could not read (built by discovery on
every path that lists models, the ``run`` and ``discover`` commands; kept in the report)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class DiscoveredAccount(BaseModel):
    """How discovery went for one account (never holds a key): built by discovery, shown in
    its progress lines, kept in the report."""

    model_config = ConfigDict(defer_build=True, frozen=True)

    account: str
    kind: str
    status: str  # "ok", "error" or "skipped"
    listed: int = 0
    kept: int = 0
    error: str | None = None
    #: The listed ids left out, by reason.
    dropped: dict[str, int] = Field(default_factory=dict)

    def dropped_text(self) -> str:
        """``"image 56, audio 16"``: the models left out by reason, most first ("" for none)."""
        ranked = sorted(self.dropped.items(), key=lambda item: (-item[1], item[0]))
        return ", ".join(f"{reason} {count}" for reason, count in ranked)


class DiscoveryError(BaseModel):
    """One source discovery could not read: an account's listing, Models.dev or the ZDR feed
    (the text scrubbed of every key)."""

    model_config = ConfigDict(defer_build=True, frozen=True)

    account: str
    kind: str
    error: str


class DiscoveryReport(BaseModel):
    """Discovery's accounts and errors, as the report holds them."""

    model_config = ConfigDict(defer_build=True)

    accounts: list[DiscoveredAccount] = Field(default_factory=list)
    errors: list[DiscoveryError] = Field(default_factory=list)
