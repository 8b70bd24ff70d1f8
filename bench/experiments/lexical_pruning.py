"""Exact pruning of the lexical leg, simulated offline (issue 16, item 1): how many
postings would a MaxScore-style leg read at 50,000 entries, against the exact leg's
every posting of the topic's tags?

MaxScore keeps the top 25 exact: the topic's rarest tags are "essential" and read whole;
an entry carrying none of them scores at most the sum of the other tags' upper bounds,
so once that sum is below the 25th best score found, nothing else can enter. The others'
contributions are then added for the candidates still able to reach the top 25, one tag
at a time (a key lookup per candidate and tag), dropping candidates as the bound falls.
Counted here, per topic, at the best choice of essential tags: postings read whole plus
key lookups, against the exact leg's postings. Same synthetic organization and topics as
`bench.experiments.lexical_scale` (bench.synthetic, seeds as there), same BM25 as the product
(title tags at TITLE_TAG_TF); no database.

    .venv/bin/python -m bench.experiments.lexical_pruning [--entries 50000]
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
from collections import Counter, defaultdict

import numpy as np

from bench import synthetic
from grandbo.embedding.base import EMBEDDING_DIMENSIONS
from grandbo.memory.read.recall import LEG_LIMIT
from grandbo.memory.repository.lexical import BM25_B, BM25_K1
from grandbo.memory.repository.postings import TITLE_TAG_TF, title_flags
from grandbo.text.tags import tokenize


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=50_000)
    args = parser.parse_args()
    texts = synthetic.pool(1_500)
    unused_vectors = np.zeros((len(texts), EMBEDDING_DIMENSIONS), dtype=np.float32)
    docs = [
        dict(title_flags(item.title, tokenize(f"{item.title}\n{item.summary}\n{item.service}")))
        for item, _ in synthetic.organization(args.entries, texts, unused_vectors, args.entries)
    ]
    n = len(docs)
    avgdl = sum(len(d) for d in docs) / n
    df = Counter(tag for d in docs for tag in d)
    postings: dict[str, list[int]] = defaultdict(list)
    for i, d in enumerate(docs):
        for tag in d:
            postings[tag].append(i)
    rng = random.Random(5)
    topics = [tokenize(synthetic.topic_text(rng)) for _ in range(40)]

    exact_reads, pruned_reads = [], []
    for topic in topics:
        tags = sorted({tag for tag in topic if df[tag]}, key=lambda tag: (df[tag], tag))
        weight = {t: math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in tags}

        def contribution(tag: str, i: int, weight: dict[str, float] = weight) -> float:
            tf = TITLE_TAG_TF if docs[i][tag] else 1.0
            norm = 1 - BM25_B + BM25_B * len(docs[i]) / avgdl
            return weight[tag] * tf * (BM25_K1 + 1) / (tf + BM25_K1 * norm)

        bound = {t: max(contribution(t, i) for i in postings[t]) for t in tags}
        best: int | None = None
        for k in range(1, len(tags) + 1):
            essential, others = tags[:k], tags[k:]
            partial: Counter[int] = Counter()
            for tag in essential:
                for i in postings[tag]:
                    partial[i] += contribution(tag, i)
            remaining = sum(bound[t] for t in others)
            scores = dict(partial)
            ranked = sorted(scores.values(), reverse=True)
            threshold = ranked[LEG_LIMIT - 1] if len(ranked) >= LEG_LIMIT else 0.0
            if others and remaining >= threshold:
                continue  # an entry with none of the essential tags could still enter
            lookups = 0
            for tag in others:
                remaining -= bound[tag]
                lookups += len(scores)
                for i in scores:
                    if tag in docs[i]:
                        scores[i] += contribution(tag, i)
                ranked = sorted(scores.values(), reverse=True)
                threshold = ranked[LEG_LIMIT - 1] if len(ranked) >= LEG_LIMIT else 0.0
                scores = {i: s for i, s in scores.items() if s + remaining >= threshold}
            reads = sum(df[t] for t in essential) + lookups
            best = reads if best is None else min(best, reads)
        exact_reads.append(sum(df[t] for t in tags))
        pruned_reads.append(best if best is not None else exact_reads[-1])
    print(
        f"{args.entries:,} entries, {len(topics)} topics: exact leg reads"
        f" {statistics.mean(exact_reads):,.0f} postings per topic (median"
        f" {statistics.median(exact_reads):,.0f}); MaxScore at its best split reads"
        f" {statistics.mean(pruned_reads):,.0f} postings and key lookups (median"
        f" {statistics.median(pruned_reads):,.0f}):"
        f" {sum(exact_reads) / sum(pruned_reads):.2f}x fewer"
    )


if __name__ == "__main__":
    main()
