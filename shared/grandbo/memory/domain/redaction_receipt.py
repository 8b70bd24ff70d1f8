"""A redaction's receipt (issue 52, point 4): where the removed text and its spellings
were searched, what was found and removed there, and that nothing was left, with when and
by whom; digests only (the spellings' salted digests stay in
org_memory_redacted_spellings, never the spellings). `grandbo audit` re-verifies every
receipt against what the organization holds now.
"""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field

# what no receipt can cover, said with every receipt (docs/OPERATIONS.md, "What a
# receipt cannot cover", the steps for each)
NOT_COVERED = (
    "the write-ahead log and the table files until `grandbo rewrite-redacted` runs; "
    "backups and snapshots until their retention ends; exports already taken"
)


class ReceiptPlace(BaseModel):
    """One place searched: found, removed, left (counts)."""

    model_config = ConfigDict(frozen=True)

    place: str
    found: int
    removed: int
    left: int


class RedactionReceipt(BaseModel):
    """A redaction's receipt."""

    model_config = ConfigDict(frozen=True)

    entry_id: UUID
    issued_at: datetime
    actor: str
    spellings: int = Field(description="spellings searched for (their salted digests kept)")
    places: list[ReceiptPlace]
    verified_at: datetime | None = None
    verified_left: int | None = Field(
        default=None, description="what the latest audit found spelling the text again"
    )
    not_covered: str = NOT_COVERED

    @property
    def left(self) -> int:
        return sum(p.left for p in self.places)
