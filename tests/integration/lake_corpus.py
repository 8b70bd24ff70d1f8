"""A synthetic lake large enough for a confidence fit (96 entries): sixteen services, each
with six kinds of failure, every entry's title and summary in its own words (a cause, a
component and a fix of its own), so that questions made from one entry share words with
others of its service and of its failure without being theirs."""

from __future__ import annotations

from typing import Any

from .helpers import entry

SERVICES = [
    "checkout", "payments", "ledger", "search", "billing", "catalog", "inventory",
    "shipping", "identity", "gateway", "pricing", "reviews", "coupons", "returns",
    "invoices", "fraud",
]  # fmt: skip
FAILURES = [
    (
        "requests time out waiting for a database connection",
        "connections leaked by {detail} were never returned to the pool",
        "closing the {detail} cursor in a finally block",
    ),
    (
        "pods restarted in a loop with OOMKilled",
        "a cache keyed by {detail} grew without bound",
        "bounding the {detail} cache and adding an eviction policy",
    ),
    (
        "TLS handshakes failed for every client",
        "the certificate for {detail} expired unnoticed",
        "automating renewal of the {detail} certificate",
    ),
    (
        "latency spiked after a deploy",
        "a missing index on {detail} forced sequential scans",
        "adding the {detail} index concurrently",
    ),
    (
        "messages piled up in the queue",
        "a poison message about {detail} blocked the consumer",
        "routing failed {detail} messages to a dead-letter queue",
    ),
    (
        "disk filled and writes failed",
        "verbose {detail} logs were never rotated",
        "rotating and compressing the {detail} logs hourly",
    ),
]
DETAILS = [
    "refund batches", "currency rates", "nightly exports", "session tokens", "image thumbnails",
    "webhook retries", "tax tables", "warehouse slots", "carrier labels", "audit trails",
    "promo codes", "price rules", "review moderation", "return labels", "invoice pdfs",
    "risk scores", "ledger snapshots", "search synonyms", "cart merges", "address lookups",
]  # fmt: skip


def lake() -> list[dict[str, Any]]:
    out = []
    for s, service in enumerate(SERVICES):
        for f, (symptom, cause, fix) in enumerate(FAILURES):
            detail = DETAILS[(s * 7 + f * 3) % len(DETAILS)]
            title = f"{service.capitalize()} {symptom}"
            summary = (
                f"{service.capitalize()} {symptom} because "
                f"{cause.format(detail=detail)}. Fixed by {fix.format(detail=detail)}."
            )
            out.append(entry(title, summary, tags=[service, detail.split()[0]]))
    return out
