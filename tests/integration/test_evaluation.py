"""The eval harness on a small BEIR folder written by the test, through the real path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grandbo.evaluation import format_table, run_eval, score_ranking
from grandbo.memory.service import MemoryService


def test_score_ranking_computes_recall_mrr_and_ndcg() -> None:
    recall5, recall10, mrr, ndcg, _ = score_ranking(["x", "a", "y", "b"], {"a": 1, "b": 1})
    assert recall5 == 1.0
    assert recall10 == 1.0
    assert mrr == pytest.approx(0.5)
    # DCG = 1/log2(3) + 1/log2(5); IDCG = 1 + 1/log2(3)
    assert ndcg == pytest.approx((1 / 1.58496 + 1 / 2.32193) / (1 + 1 / 1.58496), rel=1e-4)
    assert score_ranking([], {"a": 1}) == (0.0, 0.0, 0.0, 0.0, 0.0)
    many = {f"d{i}": 1 for i in range(16)}
    assert score_ranking([f"d{i}" for i in range(5)], many)[0] == pytest.approx(5 / 16)
    assert score_ranking([f"d{i}" for i in range(5)], many)[4] == 1.0


def _write_beir(folder: Path) -> None:
    docs = [
        ("d1", "Disk full", "The WAL volume on the primary database filled up"),
        ("d2", "DNS timeouts", "CoreDNS pods were throttled and lookups timed out"),
        ("d3", "Cert expiry", "An intermediate TLS certificate expired at the edge"),
    ]
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": i, "title": t, "text": x}) + "\n" for i, t, x in docs)
    )
    queries = [
        ("q1", "writes failed because the database WAL volume was full"),
        ("q2", "name lookups from pods timed out because CoreDNS was throttled"),
        ("q3", "slug-only"),
    ]
    (folder / "queries_symptom.jsonl").write_text(
        "".join(json.dumps({"_id": i, "text": x}) + "\n" for i, x in queries)
    )
    (folder / "qrels_symptom.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\nq3\td3\t1\n"
    )


def test_eval_reports_every_mode_and_skips_contract_violations(
    service: MemoryService, tmp_path: Path
) -> None:
    _write_beir(tmp_path)
    report = run_eval(service, tmp_path, "symptom", cutoffs=[0.5])

    assert report["documents"] == 3
    assert report["entries_embedded"] == 3
    assert report["queries_scored"] == 2
    assert len(report["queries_skipped"]) == 1  # the slug query is refused by the contract
    assert report["modes"]["lexical"]["recall@5"] == 1.0
    assert report["modes"]["hybrid"]["mrr@10"] == 1.0
    assert set(report["modes"]) == {"lexical", "vector", "hybrid", "confidence"}
    assert "0.5" in report["cutoff_sweep"]
    table = format_table(report)
    assert "hybrid" in table
    assert "skipped by the topic contract: 1" in table


def test_malformed_documents_are_reported_by_id_and_the_eval_goes_on(
    service: MemoryService, tmp_path: Path
) -> None:
    _write_beir(tmp_path)
    with (tmp_path / "corpus.jsonl").open("a") as corpus:
        corpus.write(json.dumps({"_id": "empty", "title": "Empty report", "text": ""}) + "\n")
        corpus.write(json.dumps({"_id": "no-text", "title": "No description"}) + "\n")
        corpus.write(
            json.dumps({"_id": "ctl", "title": "Bell \x07 in title", "text": "x " * 20}) + "\n"
        )
    report = run_eval(service, tmp_path, "symptom")
    refused = report["documents_refused"]
    assert [line.split(":")[0] for line in refused] == ["empty", "no-text", "ctl"]
    assert all(": summary:" in line or ": title:" in line for line in refused)
    assert report["entries_embedded"] == 3
    assert report["modes"]["hybrid"]["recall@5"] == 1.0
    assert "documents refused by the entry contract (left out): 3" in format_table(report)


def _write_duplicates(folder: Path) -> None:
    """Queries that are corpus documents (GitBugs' `duplicate` task): d1 and d2 report one
    failure, d3 another, d4 another in some of d1's words."""
    docs = [
        ("d1", "Checkout pool leak", "checkout leaked database connections on a retry path"),
        (
            "d2",
            "Connections leaked",
            "database connections leaked from the checkout pool on every retry",
        ),
        (
            "d3",
            "Certificate expired",
            "the edge TLS certificate expired and every handshake failed",
        ),
        (
            "d4",
            "Checkout retries slow",
            "the checkout retry path waited on database locks during the spring sale",
        ),
    ]
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": i, "title": t, "text": x}) + "\n" for i, t, x in docs)
    )
    (folder / "queries_duplicate.jsonl").write_text(
        json.dumps({"_id": "d1", "text": "checkout leaked database connections on a retry path"})
        + "\n"
    )
    (folder / "qrels_duplicate.tsv").write_text("query-id\tcorpus-id\tscore\nd1\td2\t1\n")


def test_the_querys_own_document_is_ignored_when_the_data_says_it_is_the_query(
    service: MemoryService, tmp_path: Path
) -> None:
    _write_duplicates(tmp_path)
    auto = run_eval(service, tmp_path, "duplicate")  # d1 is the query: not a hit
    assert auto["documents_refused"] == []
    assert auto["modes"]["lexical"]["mrr@10"] == 1.0
    kept = run_eval(service, tmp_path, "duplicate", ignore_own="no")  # d1 takes rank 1
    assert kept["modes"]["lexical"]["mrr@10"] == 0.5
    with pytest.raises(ValueError, match="ignore_own"):
        run_eval(service, tmp_path, "duplicate", ignore_own="maybe")


def test_a_failing_reranker_is_reported_and_the_fused_order_scored(
    service: MemoryService, tmp_path: Path
) -> None:
    from collections.abc import Sequence

    from grandbo.embedding.rerank import Reranker, RerankError

    class NoCredentials(Reranker):
        name = "bedrock:amazon.rerank-v1:0"

        def rerank(self, query: str, documents: Sequence[str]) -> list[int]:
            raise RerankError("NoCredentialsError: Unable to locate credentials")

    _write_duplicates(tmp_path)  # one query, with two candidates or more to reorder
    fused = run_eval(service, tmp_path, "duplicate")
    service.reranker = NoCredentials()
    report = run_eval(service, tmp_path, "duplicate")
    assert report["reranker"] == "bedrock:amazon.rerank-v1:0"
    assert report["reranker_failures"] == report["queries_scored"] == 1
    assert report["modes"]["hybrid"]["mrr@10"] == fused["modes"]["hybrid"]["mrr@10"]
    assert "it failed (fused order served) for 1 queries" in format_table(report)


def test_malformed_rows_of_every_file_are_reported_by_line_and_the_eval_goes_on(
    service: MemoryService, tmp_path: Path
) -> None:
    _write_beir(tmp_path)
    with (tmp_path / "corpus.jsonl").open("a") as corpus:
        corpus.write("{not json\n")
        corpus.write(json.dumps(["a", "list"]) + "\n")
        corpus.write(json.dumps({"title": "no id", "text": "x " * 20}) + "\n")
        corpus.write(json.dumps({"_id": "t", "title": 7, "text": "x " * 20}) + "\n")
        corpus.write(json.dumps({"_id": 42, "title": "An integer id", "text": "y " * 20}) + "\n")
        corpus.write(json.dumps({"_id": "d1", "title": "Twice", "text": "another text"}) + "\n")
        corpus.write(json.dumps({"_id": "m", "text": "z " * 20, "metadata": "oops"}) + "\n")
    with (tmp_path / "queries_symptom.jsonl").open("a") as queries:
        queries.write("]\n")
        queries.write(json.dumps({"_id": "q9"}) + "\n")
    with (tmp_path / "qrels_symptom.tsv").open("a") as qrels:
        qrels.write("q1\td1\thigh\n")
        qrels.write("q1\tghost\t1\n")  # a document the corpus does not have
    report = run_eval(service, tmp_path, "symptom")
    lines = report["rows_malformed"]
    assert [line.split(":")[:2] for line in lines] == [
        ["corpus.jsonl", "4"],
        ["corpus.jsonl", "5"],
        ["corpus.jsonl", "6"],
        ["corpus.jsonl", "7"],
        ["corpus.jsonl", "9"],
        ["corpus.jsonl", "10"],
        ["queries_symptom.jsonl", "4"],
        ["queries_symptom.jsonl", "5"],
        ["qrels_symptom.tsv", "5"],
    ]
    assert "repeated (the first kept)" in lines[4]
    assert report["relevant_documents_not_in_memory"] == 1
    assert report["modes"]["lexical"]["recall@5"] == 1.0  # the ghost is not counted
    assert report["documents"] == 4  # d1-d3 and the integer id, read as "42"
    assert "rows that could not be read (left out): 9" in format_table(report)


def test_the_querys_own_entry_neither_takes_a_place_nor_sets_the_best_scores() -> None:
    """Fused as if memory did not hold the query's own entry: the rest is normalized by
    the best of the rest, so its order is what a memory without it would serve."""
    from uuid import uuid4

    from grandbo.evaluation import fused_without
    from grandbo.memory.repository import LexicalCandidate, SearchLegs, VectorCandidate

    own, lexical_strong, vector_strong = uuid4(), uuid4(), uuid4()
    lexical = {own: 40.0, lexical_strong: 4.0, vector_strong: 1.0}
    distance = {own: 0.0, lexical_strong: 0.6, vector_strong: 0.3}
    legs = SearchLegs(
        lexical=[LexicalCandidate(i, score, []) for i, score in lexical.items()],
        vector=[VectorCandidate(i, d) for i, d in sorted(distance.items(), key=lambda x: x[1])],
        entries={},
        active_entries=3,
        active_without_current_vector=0,
        lexical_scores=lexical,
        distances=distance,
    )
    # with the query's own entry setting the best scores, the nearer entry leads ...
    from grandbo.memory.read.recall import fuse

    assert [f.key for f in fuse(legs)] == [own, vector_strong, lexical_strong]
    # ... without it, the rest is measured against the rest: the lexical one leads
    assert fused_without(legs, {own}) == [lexical_strong, vector_strong]
