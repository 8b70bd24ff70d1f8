"""BEIR folders read defensively: a real corpus has malformed rows (a non-JSON line, a
missing or odd `_id`, a title that is not text, a qrel with a word for a score), and the
eval reports each by file, line and reason and goes on instead of stopping at it."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grandbo.text.rules import reject_unsafe_text

MAX_ID_CHARS = 200


@dataclass(frozen=True, slots=True)
class Query:
    query_id: str
    text: str


def _clean_id(value: Any) -> str:
    """A document or query id as text: a string or an integer, 1-200 safe characters."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ValueError("_id must be a string or an integer")
    text = str(value).strip()
    if not 1 <= len(text) <= MAX_ID_CHARS:
        raise ValueError(f"_id must be 1-{MAX_ID_CHARS} characters")
    return reject_unsafe_text(text)


def _rows(path: Path, problems: list[str]) -> list[tuple[int, dict[str, Any]]]:
    rows = []
    with path.open(encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                problems.append(f"{path.name}:{number}: not JSON ({exc.msg})")
                continue
            if not isinstance(row, dict):
                problems.append(f"{path.name}:{number}: not a JSON object")
                continue
            rows.append((number, row))
    return rows


def load_corpus(folder: Path, problems: list[str] | None = None) -> list[dict[str, Any]]:
    """The documents (`_id`, `title`, `text`, `metadata`); a malformed one is reported in
    `problems` and left out, a repeated `_id` keeps its first document."""
    problems = [] if problems is None else problems
    docs: dict[str, dict[str, Any]] = {}
    path = folder / "corpus.jsonl"
    for number, row in _rows(path, problems):
        try:
            doc_id = _clean_id(row.get("_id"))
            for field in ("title", "text"):
                if row.get(field) is not None and not isinstance(row[field], str):
                    raise ValueError(f"{field} must be text")
            metadata = row.get("metadata")
            if metadata is not None and not isinstance(metadata, dict):
                raise ValueError("metadata must be an object")
        except ValueError as exc:
            problems.append(f"{path.name}:{number}: {exc}")
            continue
        if doc_id in docs:
            problems.append(f"{path.name}:{number}: _id {doc_id!r} repeated (the first kept)")
            continue
        docs[doc_id] = {**row, "_id": doc_id, "metadata": metadata or {}}
    return list(docs.values())


def load_queries(folder: Path, task: str, problems: list[str] | None = None) -> list[Query]:
    problems = [] if problems is None else problems
    path = folder / f"queries_{task}.jsonl"
    queries: dict[str, Query] = {}
    for number, row in _rows(path, problems):
        try:
            query_id = _clean_id(row.get("_id"))
            if not isinstance(row.get("text"), str):
                raise ValueError("text must be text")
        except ValueError as exc:
            problems.append(f"{path.name}:{number}: {exc}")
            continue
        if query_id in queries:
            problems.append(f"{path.name}:{number}: _id {query_id!r} repeated (the first kept)")
            continue
        queries[query_id] = Query(query_id, row["text"])
    return list(queries.values())


# the set's own queries, beside the shapes a folder of rewritten questions adds
OWN_SHAPE = "full"


def load_shapes(
    folder: Path, task: str, shapes: Path | None, problems: list[str] | None = None
) -> dict[str, list[Query]]:
    """The task's queries in every shape: the set's own (`OWN_SHAPE`) and, from `shapes`,
    each `queries_TASK.SHAPE.jsonl` (the same ids, each question rewritten as an
    investigator asks it: `eval/shapes/` holds a sentence and a terse form). A rewritten
    query whose id the set does not hold is reported and left out."""
    problems = [] if problems is None else problems
    own = load_queries(folder, task, problems)
    found = {OWN_SHAPE: own}
    if shapes is None:
        return found
    ids = {q.query_id for q in own}
    files = sorted(shapes.glob(f"queries_{task}.*.jsonl"))
    if not files:
        raise FileNotFoundError(f"{shapes} holds no queries_{task}.SHAPE.jsonl")
    for path in files:
        shape = path.name[len(f"queries_{task}.") : -len(".jsonl")]
        rows = load_queries(shapes, f"{task}.{shape}", problems)
        for query in rows:
            if query.query_id not in ids:
                problems.append(f"{path.name}: _id {query.query_id!r} is not a query of the set")
        found[shape] = [q for q in rows if q.query_id in ids]
    return found


def load_qrels(
    folder: Path, task: str, problems: list[str] | None = None
) -> dict[str, dict[str, int]]:
    """query id -> {document id: grade > 0}; a malformed row is reported and left out."""
    problems = [] if problems is None else problems
    path = folder / f"qrels_{task}.tsv"
    qrels: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8", errors="replace") as handle:
        reader = csv.DictReader(handle, delimiter="\t")
        if not {"query-id", "corpus-id", "score"} <= set(reader.fieldnames or ()):
            problems.append(f"{path.name}:1: no header 'query-id, corpus-id, score'")
            return qrels
        for number, row in enumerate(reader, start=2):
            try:
                query_id = _clean_id(row.get("query-id"))
                doc_id = _clean_id(row.get("corpus-id"))
                score = int(str(row.get("score")).strip())
            except ValueError as exc:
                problems.append(f"{path.name}:{number}: {exc}")
                continue
            if score > 0:
                qrels.setdefault(query_id, {})[doc_id] = score
    return qrels
