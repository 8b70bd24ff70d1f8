"""The audit's re-verification of redaction receipts (issue 52, point 4): every question
the organization's log holds and every verdict's note, spelled with every rule, checked
against the digests of what its redactions removed (`grandbo.text.spelling.spelt_digests`);
what spells a redacted text again (a restore of an older dump, a path that skipped the
check on write) is reported per receipt, and the repair removes it whole (the text it
holds is known only by its digest, so no finer cut can be made).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from uuid import UUID

from grandbo.memory.repository import MemoryRepository
from grandbo.memory.repository.log_spellings import SPELLING_PAGE
from grandbo.text.spelling import spellings, spelt_digests

# the questions a request's audit (the console's health page) re-verifies, the newest
# by id order first; `grandbo audit` goes over all of them
REQUEST_VERIFY_ROWS = 20_000


@dataclass
class ReceiptCheck:
    """What a re-verification found."""

    questions: list[UUID] = field(default_factory=list)  # spelling a redacted text
    notes: list[int] = field(default_factory=list)  # verdict events whose note does
    left: Counter[UUID] = field(default_factory=Counter)  # per redacted entry
    checked: int = 0
    complete: bool = True
    receipts: bool = False  # the organization redacted something since 0040

    @property
    def found(self) -> int:
        return len(self.questions) + len(self.notes)


def verify_receipts(
    repo: MemoryRepository, tenant_id: str, most: int | None = None, *, record: bool = True
) -> ReceiptCheck:
    """Re-verify the organization's receipts over at most `most` questions (None: all) and
    every note; each receipt marked verified (with what it found left) when all were."""
    redacted = repo.redacted_spellings(tenant_id)
    check = ReceiptCheck()
    if redacted is None:
        return check
    check.receipts = True
    after: UUID | None = None
    while True:
        page = repo.spelt_questions(tenant_id, after)
        for question in page:
            found = spelt_digests(question.spelled, redacted.salt, redacted.digests.keys())
            if found:
                check.questions.append(question.retrieval_id)
                check.left.update({redacted.digests[key] for key in found})
        check.checked += len(page)
        if len(page) < SPELLING_PAGE:
            break
        if most is not None and check.checked >= most:
            check.complete = False
            break
        after = page[-1].retrieval_id
    for event_id, note in repo.verdict_notes(tenant_id):
        found = spelt_digests(spellings(note), redacted.salt, redacted.digests.keys())
        if found:
            check.notes.append(event_id)
            check.left.update({redacted.digests[key] for key in found})
    if record and check.complete:
        repo.mark_receipts_verified(tenant_id, check.left)
    return check


def remove_found(repo: MemoryRepository, tenant_id: str, check: ReceiptCheck) -> int:
    """The repair: every question found removed whole (topic and incident id), every note
    found removed; how many."""
    return repo.blank_questions(tenant_id, check.questions) + repo.remove_notes(
        tenant_id, check.notes
    )


def respell(repo: MemoryRepository, tenant_id: str) -> int:
    """Every question the full rules never spelled, spelled and kept; how many."""
    kept = 0
    after: UUID | None = None
    while True:
        page = repo.spelt_questions(tenant_id, after, unspelled_only=True)
        kept += repo.keep_spellings(tenant_id, page)
        if len(page) < SPELLING_PAGE:
            return kept
        after = page[-1].retrieval_id
