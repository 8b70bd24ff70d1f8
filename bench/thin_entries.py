"""What thin entries do to ranking, and what the minimum-content rule refuses (issue 14, 4).

1. Refusals: every document of each corpus folder is turned into an entry exactly as
   `grandbo eval` writes it (`grandbo.evaluation.entry_text`) and validated as a
   `NewEntry`; refusals by the thin-entry rule (`grandbo.memory.domain.content`) are counted,
   by reason, apart from refusals by the older rules (an empty description, a control
   character).
2. Ranking: the post-mortem corpus is loaded into a tenant of a throwaway embedded
   PostgreSQL with the local provider (what `grandbo eval` uses) and the symptom queries
   run through `MemoryService.rank`: R@5 and MRR@10 of each leg and of their fusion, how
   many top-5 places thin entries take, and how near the nearest one is to each query
   (cosine distance, cutoff or not). Then --thin synthetic thin entries (two to
   four generic incident words: "network issue", "database outage") are written through
   the repository directly, bypassing the rule, embedded, and the queries run again.
   With the rule they are all refused, so the "before" figures are what the rule keeps.
   The queries run twice: whole (customer-impact paragraphs, 56 words at the median) and
   cut to their first --short-words words, the size of a topic Beacon sends.

Run: `.venv/bin/python -m bench.thin_entries --corpus ../shared/eval/cloud_postmortems
[--count ../shared/eval/gitbugs_hadoop] [--thin 40] [--short-words 12] [--json /tmp/thin.json]`
"""

from __future__ import annotations

import os

os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "ERROR")

import argparse
import json
import shutil
import statistics
import tempfile
import uuid
from collections import Counter
from pathlib import Path
from typing import Any
from uuid import UUID

import numpy as np
from pydantic import ValidationError

from grandbo.beir import load_corpus, load_qrels, load_queries
from grandbo.embedding.base import render_entry_text
from grandbo.errors import InvalidInputError
from grandbo.evaluation import entry_text, load_into_tenant, score_ranking
from grandbo.local.bootstrap import open_service
from grandbo.local.postgres import stop_embedded_postgres
from grandbo.local.settings import Settings
from grandbo.memory.domain.content import MIN_INFORMATIVE_TAGS, MIN_SUMMARY_WORDS
from grandbo.memory.domain.idempotency import KeySpace, idempotency_key
from grandbo.memory.domain.models import NewEntry, Origin, WriteContext
from grandbo.memory.domain.topic import validate_topic
from grandbo.memory.service import MemoryService
from grandbo.text.tags import tags_for

# What a hurried admin or a terse finding says: two to four generic incident words.
THIN_PHRASES = [
    "network issue",
    "database outage",
    "deploy failed",
    "high latency",
    "service down",
    "timeout errors",
    "connection refused",
    "disk full",
    "memory leak",
    "certificate expired",
    "DNS problem",
    "load balancer issue",
    "storage degraded",
    "API errors",
    "customers impacted",
    "rollback fixed it",
    "region outage",
    "authentication failures",
    "slow queries",
    "packet loss",
    "capacity issue",
    "quota exceeded",
    "replication lag",
    "throttling errors",
    "failover happened",
    "VM restarts",
    "backend unhealthy",
    "portal unavailable",
    "login errors",
    "increased error rate",
    "intermittent failures",
    "degraded performance",
    "upgrade went wrong",
    "power failure",
    "fiber cut",
    "hardware failure",
    "bad configuration change",
    "bad deployment",
    "service unavailable",
    "data center issue",
    "cache problem",
    "queue backlog",
    "CPU spike",
    "network partition",
    "DNS outage",
    "storage outage",
    "compute issue",
    "monitoring alert",
    "partial outage",
    "sign in issue",
]


def refusals(folder: Path) -> dict[str, Any]:
    """How many of the folder's documents each rule refuses, as `grandbo eval` writes them."""
    reasons: Counter[str] = Counter()
    examples: dict[str, str] = {}
    corpus = load_corpus(folder)
    for doc in corpus:
        title, summary = entry_text(doc)
        try:
            NewEntry(title=title, summary=summary, origin=Origin.INCIDENT)
        except ValidationError as exc:
            error = exc.errors()[0]
            if error["type"] == "thin_entry":
                reason = "thin: " + error["msg"].split(":")[0]
            else:
                reason = f"older rule: {'.'.join(map(str, error['loc']))} {error['type']}"
            reasons[reason] += 1
            examples.setdefault(reason, f"{doc['_id']}: {title[:50]!r} / {summary[:50]!r}")
    thin = sum(n for r, n in reasons.items() if r.startswith("thin"))
    return {
        "folder": folder.name,
        "documents": len(corpus),
        "refused_by_thin_rule": thin,
        "refused_by_older_rules": sum(reasons.values()) - thin,
        "reasons": dict(reasons.most_common()),
        "examples": examples,
    }


def thin_text(n: int) -> tuple[str, str]:
    phrase = THIN_PHRASES[n % len(THIN_PHRASES)]
    return phrase[0].upper() + phrase[1:], phrase


def write_thin_entries(service: MemoryService, tenant: str, count: int) -> set[UUID]:
    """`count` thin entries written through the repository, as if the rule did not exist."""
    ids = set()
    refused = 0
    for n in range(count):
        title, summary = thin_text(n)
        try:
            NewEntry(title=title, summary=summary)
        except ValidationError:
            refused += 1
        entry = NewEntry.model_construct(title=title, summary=summary, origin=Origin.ADMIN)
        context = WriteContext(
            actor="bench-thin", idempotency_key=idempotency_key(KeySpace.EVAL, "thin", str(n))
        )
        outcome = service.repository.create_entry(
            tenant, entry, tags_for([title, summary]), context
        )
        ids.add(outcome.entry.entry_id)
    assert refused == count, f"the rule lets {count - refused} synthetic thin entries through"
    return ids


def measure(
    service: MemoryService,
    tenant: str,
    folder: Path,
    doc_of_entry: dict[UUID, str],
    thin: set[UUID],
    words: int | None = None,
    thin_vectors: np.ndarray | None = None,
) -> dict[str, Any]:
    """Hybrid and per-leg R@5 / MRR@10 on the symptom task, and the top-5 places thin
    entries take; with `words`, each query cut to its first `words` words."""
    queries = load_queries(folder, "symptom")
    qrels = load_qrels(folder, "symptom")
    scores: dict[str, list[tuple[float, float]]] = {"lexical": [], "vector": [], "hybrid": []}
    thin_slots: Counter[str] = Counter()
    queries_touched: Counter[str] = Counter()
    thin_vector_candidates: list[int] = []
    nearest_thin: list[float] = []
    for query in queries:
        relevant = qrels.get(query.query_id)
        topic = query.text if words is None else " ".join(query.text.split()[:words])
        if not relevant:
            continue
        try:
            validate_topic(topic)
        except InvalidInputError:
            continue
        ranked = service.rank(tenant, topic)
        rankings = {
            "lexical": [c.entry_id for c in ranked.legs.lexical],
            "vector": [c.entry_id for c in ranked.legs.vector],
            "hybrid": ranked.fused,
        }
        for mode, ids in rankings.items():
            docs = [doc_of_entry.get(i, f"thin:{i}") for i in ids]
            recall5, _, mrr, _, _ = score_ranking(docs, relevant)
            scores[mode].append((recall5, mrr))
            taken = sum(1 for i in ids[:5] if i in thin)
            thin_slots[mode] += taken
            queries_touched[mode] += taken > 0
        thin_vector_candidates.append(sum(1 for c in ranked.legs.vector if c.entry_id in thin))
        if thin_vectors is not None:  # cosine distance of the nearest thin entry, cutoff or not
            q = np.asarray(service.provider.embed_one(topic))
            nearest_thin.append(float(1 - (thin_vectors @ q / np.linalg.norm(q)).max()))
    out: dict[str, Any] = {"queries": len(scores["hybrid"])}
    for mode, values in scores.items():
        out[mode] = {
            "recall@5": round(statistics.fmean(v[0] for v in values), 4),
            "mrr@10": round(statistics.fmean(v[1] for v in values), 4),
            "top5_places_taken_by_thin": thin_slots[mode],
            "queries_with_thin_in_top5": queries_touched[mode],
        }
    out["thin_vector_candidates_per_query"] = round(statistics.fmean(thin_vector_candidates), 2)
    if nearest_thin:
        cuts = statistics.quantiles(nearest_thin, n=20, method="inclusive")
        out["nearest_thin_distance_p5_p50"] = [round(cuts[0], 3), round(cuts[9], 3)]
        cutoff = service.provider.vector_cutoff
        out["queries_with_thin_under_cutoff"] = sum(d < cutoff for d in nearest_thin)
    return out


def ranking_effect(folder: Path, thin_count: int, short_words: int) -> dict[str, Any]:
    scratch = Path(tempfile.mkdtemp(prefix="grandbo-bench-thin-"))
    settings = Settings(data_dir=scratch, provider="local")
    try:
        with open_service(settings) as service:
            tenant = f"thin-{uuid.uuid4().hex[:12]}"
            doc_of_entry = load_into_tenant(service, tenant, load_corpus(folder))
            service.embed_pending(tenant)
            forms = {"whole": None, f"first {short_words} words": short_words}
            before = {
                form: measure(service, tenant, folder, doc_of_entry, set(), words)
                for form, words in forms.items()
            }
            thin = write_thin_entries(service, tenant, thin_count)
            service.embed_pending(tenant)
            texts = [render_entry_text(*thin_text(n), None) for n in range(thin_count)]
            vectors = np.asarray(service.provider.embed(texts))
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            after = {
                form: measure(service, tenant, folder, doc_of_entry, thin, words, vectors)
                for form, words in forms.items()
            }
            return {
                "provider": service.provider.embed_rev,
                "vector_cutoff": service.provider.vector_cutoff,
                "thin_entries": thin_count,
                "before": before,
                "after": after,
            }
    finally:
        stop_embedded_postgres(scratch)
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", type=Path, required=True, help="the post-mortem folder")
    parser.add_argument(
        "--count", type=Path, action="append", default=[], help="also count refusals here"
    )
    parser.add_argument("--thin", type=int, default=40, help="synthetic thin entries")
    parser.add_argument("--short-words", type=int, default=12, help="words of a short topic")
    parser.add_argument("--json", type=Path, help="also write the report as JSON here")
    args = parser.parse_args()

    report: dict[str, Any] = {
        "rule": {
            "min_summary_words": MIN_SUMMARY_WORDS,
            "min_informative_tags": MIN_INFORMATIVE_TAGS,
        },
        "refusals": [refusals(folder) for folder in [args.corpus, *args.count]],
    }
    for counted in report["refusals"]:
        print(
            f"{counted['folder']}: {counted['documents']} documents, "
            f"{counted['refused_by_thin_rule']} refused by the thin-entry rule, "
            f"{counted['refused_by_older_rules']} by older rules"
        )
        for reason, n in counted["reasons"].items():
            print(f"  {n:>5}  {reason}   e.g. {counted['examples'][reason]}")
    effect = ranking_effect(args.corpus, args.thin, args.short_words)
    report["ranking"] = effect
    print(
        f"\nsymptom task, provider {effect['provider']}, cutoff {effect['vector_cutoff']}; "
        f"{effect['thin_entries']} synthetic thin entries"
    )
    for form in effect["before"]:
        print(f"\nqueries: {form} ({effect['before'][form]['queries']} scored)")
        print(f"{'':<16}{'R@5':>8}{'MRR@10':>8}{'thin top-5 places':>19}{'queries hit':>13}")
        for label in ("before", "after"):
            for mode in ("lexical", "vector", "hybrid"):
                s = effect[label][form][mode]
                print(
                    f"{label + ' ' + mode:<16}{s['recall@5']:>8.4f}{s['mrr@10']:>8.4f}"
                    f"{s['top5_places_taken_by_thin']:>19}{s['queries_with_thin_in_top5']:>13}"
                )
        after = effect["after"][form]
        print(
            "thin entries among the vector leg's candidates, per query: "
            f"{after['thin_vector_candidates_per_query']}; nearest thin entry's cosine "
            f"distance p5 / p50: {after['nearest_thin_distance_p5_p50']}, under the cutoff "
            f"for {after['queries_with_thin_under_cutoff']} queries"
        )
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
        print(f"JSON report written to {args.json}")


if __name__ == "__main__":
    main()
