"""The memory lake's health (issue 14): what is wrong with an organization's memory, and
what can safely be put right.

Checks, each a `Finding` when something is wrong:

- `unembedded`: active entries without a current vector for longer than EMBED_GRACE_S
  (a fresh write waits for its embed job: that is not a problem yet), with the oldest age;
- `stale_vectors`: vectors of another model or of an older revision;
- `projection_drift`: the projection differs from a replay of the events;
- `unreplayable_events`: events the replay cannot fold (an earlier version's import
  stored them), left out of the replay and reported, never repaired;
- `index_drift`: tag statistics or postings differ from the replayed entries;
- `expired_active`: episodic entries past their expiry, still active;
- `missing_index`: past HNSW_MIN_ENTRIES active entries without a valid HNSW index;
- `misleading`: entries more callers called misleading than the review threshold;
- `orphaned_recurrences`: entries merged into an entry no longer served (retired,
  superseded), whose lesson nothing serves;
- `stale_lessons`: active entries about a service the topology has since retired or renamed,
  or naming a dependency that is gone (`grandbo.memory.read.staleness`);
- `unscrubbed_log`: logged questions that served an entry since redacted and that no
  redaction went over: they may quote its removed text (issue 44);
- `log_dropped`: questions the retrieval log did not keep in the last 7 days, its day's
  bound reached (`retrieval_rows_per_day`, a quarter of it per caller), with the callers
  dropped most: a flood, or a bound set too low;
- `log_unlogged`: questions answered while the writer was out of reach, which the log
  could not write (counted once the writer was back, migration 0038);
- `redaction_receipts`: questions and verdicts' notes that spell a text a redaction removed
  (its receipt re-verified against its digests: `grandbo.memory.curation.receipts_audit`),
  each receipt marked verified when every question was gone over;
- `log_unspelled`: questions the current spelling rules never spelled (logged before
  migration 0040, by older code, or restored: the database spelled them, with no
  look-alike letters and no base64; or kept by an earlier round of the rules, before
  migration 0042: no hex, nested or glued encodings), which a redaction's search reads as
  they were spelled.

Repairs (`repair`): embed what lacks a vector, rebuild the projection from the events,
retire the expired, build the missing index, blank the unscrubbed questions' topics,
remove whole what spells a redacted text, re-spell the unspelled questions.
Misleading entries, orphaned recurrences and stale entries need a person (split them, or
retire them too): listed, never changed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from grandbo.errors import InvalidInputError
from grandbo.memory.curation.receipts_audit import (
    REQUEST_VERIFY_ROWS,
    remove_found,
    respell,
    verify_receipts,
)
from grandbo.memory.repository.vector_indexes import HNSW_MIN_ENTRIES, index_name
from grandbo.memory.service import MemoryService

EMBED_GRACE_S = 300.0


@dataclass
class Finding:
    check: str
    count: int
    detail: str
    repairable: bool
    repaired: str | None = None


@dataclass
class TenantHealth:
    tenant_id: str
    findings: list[Finding] = field(default_factory=list)
    # entries whose text was removed for good (a count, not a problem)
    redactions: int = 0

    @property
    def healthy(self) -> bool:
        return not any(f.repaired is None for f in self.findings)

    def as_dict(self) -> dict[str, Any]:
        return {
            "tenant_id": self.tenant_id,
            "healthy": self.healthy,
            "findings": [asdict(f) for f in self.findings],
            "redactions": self.redactions,
        }


def audit(
    service: MemoryService, tenant_id: str, *, verify_most: int | None = REQUEST_VERIFY_ROWS
) -> TenantHealth:
    """Every check for one organization, read-only but for the receipts' verification
    mark; the receipts re-verified over at most `verify_most` questions (None: all, what
    `grandbo audit` does)."""
    repo = service.repository
    health = TenantHealth(tenant_id, redactions=repo.count_redactions(tenant_id))
    serving = service.serving_provider(tenant_id)
    lacking, stale = repo.vector_coverage(tenant_id, serving.embed_rev)
    oldest = service.oldest_pending_age_s(tenant_id)
    if lacking and oldest > EMBED_GRACE_S:
        health.findings.append(
            Finding(
                "unembedded",
                lacking,
                f"{lacking} active entries without a vector of {serving.embed_rev}; the "
                f"oldest has waited {oldest:.0f} s",
                repairable=True,
            )
        )
    if stale:
        health.findings.append(
            Finding(
                "stale_vectors",
                stale,
                f"{stale} active entries hold a vector of another model or an older revision",
                repairable=True,
            )
        )
    report = repo.verify_projection(tenant_id)
    if report.unreplayable:
        health.findings.append(
            Finding(
                "unreplayable_events",
                len(report.unreplayable),
                "; ".join(report.unreplayable[:3])
                + " (left out of every replay; the log is append-only: purge the "
                "organization and import its export again, or ask for the event's removal)",
                repairable=False,
            )
        )
    index = [m for m in report.mismatches if m.startswith("tag ")]
    drift = [m for m in report.mismatches if not m.startswith("tag ")]
    if drift:
        health.findings.append(
            Finding("projection_drift", len(drift), "; ".join(drift[:3]), repairable=True)
        )
    if index:
        health.findings.append(
            Finding("index_drift", len(index), "; ".join(index), repairable=True)
        )
    expired = repo.count_expired(tenant_id, service.now())
    if expired:
        health.findings.append(
            Finding(
                "expired_active",
                expired,
                f"{expired} episodic entries past their expiry are still active",
                repairable=True,
            )
        )
    active = repo.active_entries(tenant_id)
    if active >= HNSW_MIN_ENTRIES and not repo.has_valid_vector_index(
        tenant_id, index_name(tenant_id)
    ):
        health.findings.append(
            Finding(
                "missing_index",
                1,
                f"{active} active entries (threshold {HNSW_MIN_ENTRIES}) and no valid HNSW "
                "index: the vector leg scans every vector",
                repairable=True,
            )
        )
    flagged = service.entries_for_review(tenant_id)
    if flagged:
        health.findings.append(
            Finding(
                "misleading",
                len(flagged),
                "called misleading repeatedly, for an admin to correct or retire: "
                + ", ".join(str(e.entry_id) for e in flagged[:10]),
                repairable=False,
            )
        )
    orphans = repo.orphaned_recurrences(tenant_id)
    if orphans:
        health.findings.append(
            Finding(
                "orphaned_recurrences",
                len(orphans),
                "merged into an entry that is no longer served, for an admin to split or "
                "retire: " + ", ".join(str(entry_id) for entry_id in orphans[:10]),
                repairable=False,
            )
        )
    outdated = service.stale_entries(tenant_id)
    if outdated:
        health.findings.append(
            Finding(
                "stale_lessons",
                len(outdated),
                "the topology changed under these lessons, for an admin to correct or "
                "retire: " + "; ".join(f"{entry_id} ({s.note})" for entry_id, s in outdated[:10]),
                repairable=False,
            )
        )
    unscrubbed = repo.unscrubbed_retrievals(tenant_id)
    if unscrubbed:
        health.findings.append(
            Finding(
                "unscrubbed_log",
                unscrubbed,
                f"{unscrubbed} logged questions served an entry since redacted and were not "
                "gone over by its redaction: they may quote its removed text",
                repairable=True,
            )
        )
    logged = repo.retrieval_days_logged(tenant_id, 7)
    days = [d for d in logged if d.dropped]
    if days:
        dropped = sum(d.dropped for d in days)
        callers = repo.callers_dropped(tenant_id, 7)
        by_caller = (
            "; by caller: "
            + ", ".join(f"{c.caller} {c.dropped} on {c.day.isoformat()}" for c in callers[:5])
            if callers
            else ""
        )
        health.findings.append(
            Finding(
                "log_dropped",
                dropped,
                f"the retrieval log kept at most its bounds of questions a day (the "
                f"organization's, a quarter of it per caller) and dropped {dropped} in the "
                f"last 7 days ("
                + ", ".join(f"{d.day.isoformat()}: {d.dropped}" for d in days)
                + f"{by_caller}): a caller flooding it, or retrieval_rows_per_day set too low",
                repairable=False,
            )
        )
    gaps = [d for d in logged if d.unlogged]
    if gaps:
        unlogged = sum(d.unlogged for d in gaps)
        health.findings.append(
            Finding(
                "log_unlogged",
                unlogged,
                f"{unlogged} questions were answered but could not be written to the log in "
                "the last 7 days ("
                + ", ".join(f"{d.day.isoformat()}: {d.unlogged}" for d in gaps)
                + "): the database's writer was out of reach (a failover, a restart) or "
                "refused the row; the incident and unanswered pages miss them",
                repairable=False,
            )
        )
    _receipts(service, tenant_id, health, verify_most)
    return health


def _receipts(
    service: MemoryService, tenant_id: str, health: TenantHealth, most: int | None
) -> None:
    check = verify_receipts(service.repository, tenant_id, most)
    scope = (
        f"every question ({check.checked}) and note"
        if check.complete
        else f"the first {check.checked} questions by id and every note (`grandbo audit` "
        "goes over all)"
    )
    if check.found:
        health.findings.append(
            Finding(
                "redaction_receipts",
                check.found,
                f"{len(check.questions)} questions and {len(check.notes)} verdicts' notes "
                f"spell a text a redaction removed (re-verified over {scope}; redacted "
                "entries: " + ", ".join(str(e) for e in sorted(check.left)) + "): a restore "
                "or a path that skipped the check on write; the repair removes them whole",
                repairable=True,
            )
        )
    unspelled = service.repository.count_unspelled(tenant_id)
    if unspelled:
        health.findings.append(
            Finding(
                "log_unspelled",
                unspelled,
                f"{unspelled} logged questions were spelled by the database alone (before "
                "migration 0040, by older code, or restored) or by an earlier round of the "
                "spelling rules (before migration 0042): a redaction finds what only the "
                "current rules spell (look-alikes, base64, hex, nested encodings) in them "
                "once they are re-spelled (the repair)",
                repairable=True,
            )
        )


def repair(
    service: MemoryService,
    health: TenantHealth,
    *,
    build_index: Callable[[], list[str]] | None = None,
) -> TenantHealth:
    """Fix what is safe to fix, marking each finding with what was done. The projection
    is rebuilt before anything reads it again; vectors are embedded after it."""
    tenant = health.tenant_id
    checks = {f.check: f for f in health.findings}

    def found(*names: str) -> list[Finding]:
        return [checks[name] for name in names if name in checks]

    if drifted := found("projection_drift", "index_drift"):  # one rebuild mends both
        report = service.repository.rebuild_projection(tenant)
        for finding in drifted:
            finding.repaired = f"projection rebuilt from {report.events} events"
    if expired := found("expired_active"):
        retired = service.retire_expired(tenant)
        expired[0].repaired = f"{retired} retired (an event each)"
    if unscrubbed := found("unscrubbed_log"):
        blanked = service.repository.blank_unscrubbed_retrievals(tenant)
        unscrubbed[0].repaired = f"{blanked} questions' topics removed whole"
    if unspelled := found("log_unspelled"):
        unspelled[0].repaired = f"{respell(service.repository, tenant)} questions re-spelled"
    if spelling := found("redaction_receipts"):
        check = verify_receipts(service.repository, tenant, record=False)
        removed = remove_found(service.repository, tenant, check)
        verify_receipts(service.repository, tenant)
        spelling[0].repaired = f"{removed} questions and notes removed whole"
    if unembedded := found("unembedded", "stale_vectors"):  # one backfill embeds both
        stored = service.embed_pending(tenant)
        for finding in unembedded:
            finding.repaired = f"{stored} vectors stored"
    if "missing_index" in checks and build_index is not None:
        built = build_index()
        checks["missing_index"].repaired = f"HNSW index built for {len(built)} organization(s)"
    return health


# What a signed admin request may repair (the console's health page): each bounded by
# what the organization holds, none building an index (the hourly index job does)
REQUEST_REPAIRS = (
    "projection_drift",
    "index_drift",
    "expired_active",
    "unembedded",
    "stale_vectors",
    "unscrubbed_log",
    "redaction_receipts",
    "log_unspelled",
)


def repair_requested(service: MemoryService, tenant_id: str, checks: Sequence[str]) -> TenantHealth:
    """Audit, then repair only the `checks` asked for (of REQUEST_REPAIRS). Vectors are not
    embedded in the request: their jobs go to the embed queue, as a write's do, and the
    embed worker stores them (`repaired` says how many were sent)."""
    unknown = [check for check in checks if check not in REQUEST_REPAIRS]
    if unknown or not checks:
        raise InvalidInputError("checks", f"name one or more of {', '.join(REQUEST_REPAIRS)}")
    health = audit(service, tenant_id)
    chosen = TenantHealth(
        tenant_id, [f for f in health.findings if f.check in checks], health.redactions
    )
    vectors = [f for f in chosen.findings if f.check in ("unembedded", "stale_vectors")]
    rest = TenantHealth(tenant_id, [f for f in chosen.findings if f not in vectors])
    repair(service, rest)
    if vectors and service.embed_queue is None:  # no worker to send to: embed here
        repair(service, TenantHealth(tenant_id, vectors))
    elif vectors and service.embed_queue is not None:
        jobs = service.pending_jobs(tenant_id)
        service.embed_queue.send(jobs)
        for finding in vectors:
            finding.repaired = f"{len(jobs)} embed jobs sent to the embed worker"
    return chosen
