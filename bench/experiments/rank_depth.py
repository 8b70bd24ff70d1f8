"""Ranking changes measured offline (issue 13, item 2): each variant of the legs and the
fusion scored on the development queries of both corpora, beside the shipped ranking.

The shipped ranking is reproduced in numpy (BM25 over tag sets exactly as
`repository/search.py` computes it, cosine distances of the same provider's vectors, the
leg depth, the cutoff and RRF k = 60), so a variant costs milliseconds instead of a
reload. The reproduction is checked against `grandbo eval`'s figures (docs/EVAL.md); a
variant worth keeping is then built into the product and measured again with
`grandbo eval`.

    .venv/bin/python -m bench.experiments.rank_depth --eval ../shared/eval \\
        [--json /tmp/rank_depth.json]

Vectors are cached under --cache (default /tmp/grandbo-rank-depth) keyed by provider and
text, so a second run embeds nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from grandbo.beir import load_corpus, load_qrels, load_queries
from grandbo.embedding.base import render_entry_text
from grandbo.embedding.local import LocalMiniLMProvider
from grandbo.errors import InvalidInputError
from grandbo.evaluation import entry_text, score_ranking
from grandbo.memory.domain.models import NewEntry, Origin
from grandbo.memory.domain.topic import validate_topic
from grandbo.memory.read.recall import LEG_LIMIT
from grandbo.memory.repository.lexical import BM25_B, BM25_K1
from grandbo.text.tags import tags_for, tokenize

# the k reciprocal-rank fusion used before score fusion replaced it (53e0ff0)
RRF_K = 60

TASKS = (
    ("cloud_postmortems", "symptom"),
    ("cloud_postmortems", "mechanism"),
    ("gitbugs_hadoop", "duplicate"),
)


@dataclass
class Corpus:
    doc_ids: list[str]
    tags: list[list[str]]
    title_tags: list[set[str]]
    texts: list[str]
    vectors: np.ndarray  # unit rows, native dimensions
    idf: dict[str, float] = field(default_factory=dict)
    df: dict[str, int] = field(default_factory=dict)
    postings: dict[str, list[int]] = field(default_factory=dict)
    lengths: np.ndarray = field(default_factory=lambda: np.zeros(0))
    avgdl: float = 1.0

    def __post_init__(self) -> None:
        n = len(self.doc_ids)
        for index, tags in enumerate(self.tags):
            for tag in tags:
                self.postings.setdefault(tag, []).append(index)
        self.df = {tag: len(p) for tag, p in self.postings.items()}
        self.idf = {t: math.log(1.0 + (n - d + 0.5) / (d + 0.5)) for t, d in self.df.items()}
        self.lengths = np.array([len(t) for t in self.tags], dtype=np.float64)
        self.avgdl = max(float(self.lengths.mean()), 1.0)


class Embedder:
    """The local provider's vectors (native 384 dimensions), cached on disk."""

    def __init__(self, cache: Path) -> None:
        self.provider = LocalMiniLMProvider()
        self.cache = cache
        cache.mkdir(parents=True, exist_ok=True)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        key = hashlib.sha256(
            (self.provider.embed_rev + "\x00" + "\x00".join(texts)).encode()
        ).hexdigest()[:24]
        path = self.cache / f"{key}.npy"
        if path.exists():
            return np.load(path)
        vectors = np.array(self.provider.embed(list(texts)), dtype=np.float32)[:, :384]
        np.save(path, vectors)
        return vectors


def load(folder: Path, embedder: Embedder) -> Corpus:
    """The documents the entry contract accepts, tagged and embedded as entries are."""
    ids, tags, title_tags, texts = [], [], [], []
    for doc in load_corpus(folder, []):
        title, summary = entry_text(doc)
        try:
            NewEntry(title=title, summary=summary, origin=Origin.INCIDENT)
        except ValidationError:
            continue
        ids.append(doc["_id"])
        tags.append(tags_for([title, summary, ""]))
        title_tags.append(set(tokenize(title)))
        texts.append(render_entry_text(title, summary, None))
    return Corpus(ids, tags, title_tags, texts, embedder.embed(texts))


# -- legs ---------------------------------------------------------------------------------

Weights = dict[str, float]


def bm25(
    corpus: Corpus,
    weights: Weights,
    *,
    k1: float = BM25_K1,
    b: float = BM25_B,
    title_boost: float = 0.0,
) -> np.ndarray:
    """BM25 over tag sets (tf = 1, or 1 + title_boost for a tag the title carries)."""
    scores = np.zeros(len(corpus.doc_ids))
    saturation = k1 * (1.0 - b + b * corpus.lengths / corpus.avgdl)
    for tag, w in weights.items():
        for index in corpus.postings.get(tag, ()):
            tf = 1.0 + (title_boost if tag in corpus.title_tags[index] else 0.0)
            scores[index] += w * tf * (k1 + 1.0) / (tf + saturation[index])
    return scores


def top(scores: np.ndarray, depth: int, mask: np.ndarray) -> list[int]:
    """Best first, ties to the later document (the SQL's most recently updated first)."""
    candidates = np.flatnonzero(mask)
    order = sorted(candidates, key=lambda i: (-round(float(scores[i]), 9), -i))
    return [int(i) for i in order[:depth]]


def topic_weights(corpus: Corpus, topic: str, query_tf: bool = False) -> Weights:
    weights = {t: corpus.idf[t] for t in dict.fromkeys(tokenize(topic)) if t in corpus.idf}
    if query_tf:
        counts: dict[str, int] = {}
        for word in topic.split():
            for tag in tokenize(word):
                counts[tag] = counts.get(tag, 0) + 1
        weights = {t: w * (1.0 + math.log(max(counts.get(t, 1), 1))) for t, w in weights.items()}
    return weights


def rrf(
    rankings: Sequence[Sequence[int]], k: float = RRF_K, leg_weights: Sequence[float] | None = None
) -> list[int]:
    scores: dict[int, float] = {}
    for li, ranking in enumerate(rankings):
        weight = 1.0 if leg_weights is None else leg_weights[li]
        for rank, key in enumerate(ranking, start=1):
            scores[key] = scores.get(key, 0.0) + weight / (k + rank)
    first = {key: i for i, key in enumerate(scores)}
    return sorted(scores, key=lambda key: (-scores[key], first[key]))


@dataclass(frozen=True)
class Query:
    query_id: str
    text: str
    vector: np.ndarray
    relevant: dict[str, int]
    own: str | None


@dataclass(frozen=True)
class Variant:
    name: str
    depth: int = LEG_LIMIT
    cutoff: float = 0.65
    k: float = RRF_K
    prf_docs: int = 0  # expand the topic with the rarest tags of this many lexical hits
    prf_tags: int = 0
    prf_weight: float = 0.0
    title_boost: float = 0.0
    b: float = BM25_B
    k1: float = BM25_K1
    leg_weights: tuple[float, float] | None = None
    vector_prf: float = 0.0  # Rocchio: topic + this * mean of the top 3 vector hits
    lexical_max_share: float = 1.0  # drop topic tags held by more than this share
    passages: bool = False
    query_tf: bool = False  # a topic tag said n times weighs 1 + log(n)
    convex: float | None = None  # score fusion: this * lexical (max-normalized) + rest * cosine
    rescored_rrf: bool = False  # RRF over the union, each candidate ranked on both legs
    partial: bool = False  # convex: a leg's score only for its own candidates (else 0)
    norm: str = (
        "max"  # convex: "max" (lexical / best, cosine as is), "minmax" (both legs), "both-max"
    )


def rank(
    corpus: Corpus, query: Query, variant: Variant, passages: tuple[np.ndarray, np.ndarray] | None
) -> list[list[int]]:
    mask = np.ones(len(corpus.doc_ids), dtype=bool)
    if query.own is not None and query.own in corpus.doc_ids:
        mask[corpus.doc_ids.index(query.own)] = False  # scored without it, as eval does
    weights = topic_weights(corpus, query.text, variant.query_tf)
    if variant.lexical_max_share < 1.0:
        n = len(corpus.doc_ids)
        weights = {
            t: w for t, w in weights.items() if corpus.df[t] <= variant.lexical_max_share * n
        }
    scores = bm25(corpus, weights, k1=variant.k1, b=variant.b, title_boost=variant.title_boost)
    lexical = [i for i in top(scores, variant.depth, mask & (scores > 0))]
    if variant.prf_docs:
        feedback: dict[str, float] = {}
        for index in lexical[: variant.prf_docs]:
            for tag in corpus.tags[index]:
                if tag not in weights and corpus.df[tag] > 1:
                    feedback[tag] = corpus.idf[tag]
        extra = sorted(feedback, key=lambda t: -feedback[t])[: variant.prf_tags]
        expanded = dict(weights)
        for tag in extra:
            expanded[tag] = variant.prf_weight * corpus.idf[tag]
        scores = bm25(corpus, expanded, k1=variant.k1, b=variant.b, title_boost=variant.title_boost)
        lexical = top(scores, variant.depth, mask & (scores > 0))
    q = query.vector
    if passages is not None and variant.passages:
        owner, matrix = passages
        sims = matrix @ q
        best = np.full(len(corpus.doc_ids), -1.0)
        np.maximum.at(best, owner, sims)
        distance = 1.0 - best
    else:
        distance = 1.0 - corpus.vectors @ q
    if variant.vector_prf:
        nearest = [i for i in np.argsort(distance) if mask[i]][:3]
        q2 = q + variant.vector_prf * corpus.vectors[nearest].mean(axis=0)
        q2 = q2 / np.linalg.norm(q2)
        distance = 1.0 - corpus.vectors @ q2
    order = [int(i) for i in np.lexsort((np.arange(len(distance)), distance)) if mask[i]]
    vector = [i for i in order[: variant.depth] if distance[i] < variant.cutoff]
    if variant.rescored_rrf:
        pool = list(dict.fromkeys(lexical + vector))
        by_lexical = sorted((i for i in pool if scores[i] > 0), key=lambda i: -scores[i])
        by_vector = sorted(pool, key=lambda i: distance[i])
        return [lexical, vector, rrf([by_lexical, by_vector], variant.k, variant.leg_weights)]
    if variant.convex is not None:
        pool = list(dict.fromkeys(lexical + vector))
        lexical_set, vector_set = set(lexical), set(vector)
        lex = {
            i: float(scores[i]) if i in lexical_set or not variant.partial else 0.0 for i in pool
        }
        sim = {
            i: max(0.0, 1.0 - float(distance[i])) if i in vector_set or not variant.partial else 0.0
            for i in pool
        }
        lex, sim = (
            normalized(lex, variant.norm),
            normalized(sim, variant.norm if variant.norm != "max" else "none"),
        )
        mixed = {i: variant.convex * lex[i] + (1.0 - variant.convex) * sim[i] for i in pool}
        return [lexical, vector, sorted(pool, key=lambda i: -mixed[i])]
    fused = rrf([lexical, vector], variant.k, variant.leg_weights)
    return [lexical, vector, fused]


def normalized(values: dict[int, float], how: str) -> dict[int, float]:
    if how == "none" or not values:
        return values
    high, low = max(values.values()), min(values.values())
    if how in ("max", "both-max"):
        return {i: v / high if high else 0.0 for i, v in values.items()}
    span = high - low
    return {i: (v - low) / span if span else 0.0 for i, v in values.items()}


MODES = ("lexical", "vector", "hybrid")


def evaluate(
    corpus: Corpus,
    queries: list[Query],
    variant: Variant,
    passages: tuple[np.ndarray, np.ndarray] | None,
) -> dict[str, dict[str, float]]:
    sums = {m: np.zeros(5) for m in MODES}
    for query in queries:
        for mode, ranking in zip(MODES, rank(corpus, query, variant, passages), strict=True):
            docs = [corpus.doc_ids[i] for i in ranking]
            sums[mode] += np.array(score_ranking(docs, query.relevant))
    return {
        m: {
            "R@5": round(s[0] / len(queries), 4),
            "MRR@10": round(s[2] / len(queries), 4),
            "Rcap@5": round(s[4] / len(queries), 4),
        }
        for m, s in sums.items()
    }


def task_queries(folder: Path, task: str, corpus: Corpus, embedder: Embedder) -> list[Query]:
    qrels = load_qrels(folder, task, [])
    loaded = set(corpus.doc_ids)
    kept = []
    for query in load_queries(folder, task, []):
        named = qrels.get(query.query_id, {})
        own = None if query.query_id in named else query.query_id
        relevant = {d: g for d, g in named.items() if d != own and d in loaded}
        try:
            validate_topic(query.text)  # as the eval: a query the contract refuses is skipped
        except InvalidInputError:
            continue
        if relevant:
            kept.append((query, relevant, own))
    vectors = embedder.embed([q.text for q, _, _ in kept])
    return [Query(q.query_id, q.text, v, r, o) for (q, r, o), v in zip(kept, vectors, strict=True)]


def passage_vectors(
    corpus: Corpus, embedder: Embedder, words: int
) -> tuple[np.ndarray, np.ndarray]:
    """Each entry's text cut into windows of `words` words (half overlapping), each
    prefixed with the entry's title line; an entry that fits is its own passage."""
    owner, texts = [], []
    for index, text in enumerate(corpus.texts):
        title, _, body = text.partition("\n")
        tokens = body.split()
        if len(tokens) <= words:
            owner.append(index)
            texts.append(text)
            continue
        for start in range(0, len(tokens) - words // 2, words // 2):
            owner.append(index)
            texts.append(title + "\n" + " ".join(tokens[start : start + words]))
    return np.array(owner), embedder.embed(texts)


def variants() -> list[Variant]:
    out = [Variant("before: BM25 tags + MiniLM top 25 < 0.65, RRF k=60")]
    out += [Variant(f"leg depth {d}", depth=d) for d in (10, 15, 40, 50, 100)]
    out += [Variant(f"cutoff {c}", cutoff=c) for c in (0.4, 0.45, 0.5, 0.55, 0.6, 0.7, 0.8)]
    out += [Variant(f"RRF k={k}", k=k) for k in (5, 10, 20, 30, 100)]
    out += [
        Variant(f"RRF weights lex {w[0]} vec {w[1]}", leg_weights=w)
        for w in ((1.0, 0.5), (0.5, 1.0), (1.0, 0.75), (0.75, 1.0))
    ]
    out += [Variant(f"BM25 b={b}", b=b) for b in (0.3, 0.5, 0.9, 1.0)]
    out += [Variant(f"BM25 k1={k1}", k1=k1) for k1 in (0.6, 2.0)]
    out += [Variant(f"title tags tf {1 + t}", title_boost=t) for t in (0.5, 1.0, 2.0)]
    out += [
        Variant(f"PRF {d} docs {n} tags x{w}", prf_docs=d, prf_tags=n, prf_weight=w)
        for d, n, w in (
            (3, 5, 0.3),
            (3, 10, 0.3),
            (5, 10, 0.3),
            (3, 10, 0.5),
            (5, 20, 0.2),
            (10, 10, 0.3),
            (3, 5, 0.5),
        )
    ]
    out += [Variant(f"vector Rocchio x{w}", vector_prf=w) for w in (0.3, 0.6)]
    out += [
        Variant(f"drop topic tags in > {s:.0%} of entries", lexical_max_share=s) for s in (0.2, 0.5)
    ]
    out += [Variant("passages (best of 128-word windows)", passages=True)]
    # round 2: around what round 1 found
    out += [Variant(f"r2 title tf {1 + t}", title_boost=t) for t in (3.0, 5.0, 9.0)]
    out += [
        Variant(f"r2 title tf {1 + t} depth {d}", title_boost=t, depth=d)
        for t in (2.0, 3.0)
        for d in (15, 20)
    ]
    out += [Variant(f"r2 title tf 3 k={k}", title_boost=2.0, k=k) for k in (20, 40)]
    out += [Variant("r2 query tf"), Variant("r2 query tf", query_tf=True)][1:]
    out += [Variant("r2 title tf 3 + query tf", title_boost=2.0, query_tf=True)]
    out += [Variant(f"r2 convex fusion {a}", convex=a) for a in (0.3, 0.5, 0.7)]
    out += [
        Variant(f"r3 title tf {1 + t} depth {d} k={k}", title_boost=t, depth=d, k=k)
        for t in (1.5, 2.0, 2.5)
        for d in (20, 25, 30)
        for k in (40, 60)
    ]
    out += [
        Variant(f"r3 convex fusion {a} + title tf 3", convex=a, title_boost=2.0)
        for a in (0.2, 0.3, 0.4)
    ]
    out += [
        Variant(f"r4 convex {a} {n} + title tf 3", convex=a, title_boost=2.0, norm=n)
        for n in ("minmax", "both-max")
        for a in (0.3, 0.4, 0.5, 0.6)
    ]
    out += [
        Variant(f"r4 convex {a} max + title tf 3 depth {d}", convex=a, title_boost=2.0, depth=d)
        for a in (0.35, 0.45, 0.5)
        for d in (25, 50)
    ]
    out += [
        Variant("r5 title tf 3, RRF over the union rescored", title_boost=2.0, rescored_rrf=True),
        Variant(
            "r5 title tf 3, convex 0.6 both-max, partial",
            title_boost=2.0,
            convex=0.6,
            norm="both-max",
            partial=True,
        ),
        Variant("r5 title tf 3, convex 0.7 both-max", title_boost=2.0, convex=0.7, norm="both-max"),
        Variant(
            "now: title tf 3 + score fusion 0.6 (both-max)",
            title_boost=2.0,
            convex=0.6,
            norm="both-max",
        ),
    ]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--eval", type=Path, required=True, help="the eval folder")
    parser.add_argument(
        "--cache", type=Path, default=Path(tempfile.gettempdir()) / "grandbo-rank-depth"
    )
    parser.add_argument("--passage-words", type=int, default=128)
    parser.add_argument("--only", action="append", default=[], help="variant name prefix")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    embedder = Embedder(args.cache)
    corpora: dict[str, Corpus] = {}
    results: dict[str, dict[str, Any]] = {}
    chosen = [
        v for v in variants() if not args.only or any(v.name.startswith(o) for o in args.only)
    ]
    for dataset, task in TASKS:
        folder = args.eval / dataset
        corpus = corpora.get(dataset) or load(folder, embedder)
        corpora[dataset] = corpus
        queries = task_queries(folder, task, corpus, embedder)
        passages = None
        if any(v.passages for v in chosen):
            passages = passage_vectors(corpus, embedder, args.passage_words)
        for variant in chosen:
            figures = evaluate(corpus, queries, variant, passages)
            results.setdefault(variant.name, {})[task] = figures
    base = results.get(variants()[0].name)
    print(f"{'variant':52} " + "  ".join(f"{t:>22}" for _, t in TASKS))
    print(f"{'':52} " + "  ".join(f"{'hybrid R@5 / MRR@10':>22}" for _ in TASKS))
    for name, figures in results.items():
        cells = []
        for _, task in TASKS:
            h = figures[task]["hybrid"]
            metric = "Rcap@5" if task == "mechanism" else "R@5"
            delta = ""
            if base is not None:
                dr = h[metric] - base[task]["hybrid"][metric]
                dm = h["MRR@10"] - base[task]["hybrid"]["MRR@10"]
                delta = f" ({dr:+.3f}/{dm:+.3f})"
            cells.append(f"{h[metric]:.4f}/{h['MRR@10']:.4f}{delta}")
        print(f"{name[:52]:52} " + "  ".join(f"{c:>22}" for c in cells))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
