"""Fit the confidence model from `grandbo eval --no-answer --samples` files.

    grandbo eval ../shared/eval/cloud_postmortems --task symptom --no-answer \\
        --samples /tmp/samples_symptom.json
    grandbo eval ../shared/eval/gitbugs_hadoop --task duplicate --no-answer \\
        --samples /tmp/samples_duplicate.json
    python -m bench.confidence_fit /tmp/samples_symptom.json /tmp/samples_duplicate.json

Pools the `fit` half of every file's queries (`grandbo.evaluation_no_answer.fit_half`),
fits the logistic model (`fit_logistic`, L2 1.0), prints its coefficients as the
`ConfidenceModel` to paste into `grandbo.memory.confidence.fitted`, and, for each file
and half, what a range of floors would serve: the mean hits on the queries memory cannot
answer and recall@5 on the others beside today's (five fused hits). The samples hold each
query's candidates in the fused order, so the five served are the fused five (ranking by
confidence was measured and lost: docs/EVAL.md), or with `--rank-by-confidence` the best
five by confidence. The floor is chosen
on the `fit` half; the `measure` half is the out-of-sample figure.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

from grandbo.memory.confidence.logistic import sigmoid
from grandbo.memory.confidence.model import fit_logistic
from grandbo.memory.confidence.signals import FEATURES

FLOORS = (0.01, 0.02, 0.025, 0.03, 0.04, 0.05, 0.1, 0.2)


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def floors(
    data: dict[str, Any],
    intercept: float,
    weights: dict[str, float],
    half: str,
    by_confidence: bool,
) -> None:
    by_query: dict[str, list[tuple[float, int, int]]] = {}
    for place, (x, y, q, h) in enumerate(
        zip(data["features"], data["labels"], data["queries"], data["halves"], strict=True)
    ):
        if h == half:
            p = sigmoid(intercept + sum(weights[f] * v for f, v in zip(FEATURES, x, strict=True)))
            by_query.setdefault(q, []).append((p, y, place))
    today = []
    for q, rows in by_query.items():
        relevant = data["relevant"][q]
        if relevant:
            today.append(sum(y for _, y, _ in sorted(rows, key=lambda r: r[2])[:5]) / relevant)
    print(f"  {half}: {len(by_query)} queries; today recall@5 {statistics.fmean(today):.3f}")
    for floor in FLOORS:
        hits, recall = [], []
        for q, rows in by_query.items():
            ranked = sorted(rows, key=lambda r: (-r[0], r[2]) if by_confidence else r[2])
            # as served: the floor first, then the five (collapse aside)
            served = [r for r in ranked if round(r[0], 4) >= floor][:5]
            relevant = data["relevant"][q]
            if relevant:
                recall.append(sum(y for _, y, _ in served) / relevant)
            else:
                hits.append(len(served))
        print(
            f"    floor {floor:<6} unanswerable mean hits {statistics.fmean(hits):.2f}"
            f"  answerable recall@5 {statistics.fmean(recall):.3f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("samples", nargs="+", type=Path)
    parser.add_argument("--l2", type=float, default=1.0)
    parser.add_argument(
        "--rank-by-confidence",
        action="store_true",
        help="serve the five best by confidence (default: the fused five, as served)",
    )
    args = parser.parse_args()
    sets = {path.name: load(path) for path in args.samples}
    features, labels = [], []
    for data in sets.values():
        for x, y, h in zip(data["features"], data["labels"], data["halves"], strict=True):
            if h == "fit":
                features.append(x)
                labels.append(y)
    intercept, weights = fit_logistic(features, labels, l2=args.l2)
    print(f"fit on {len(labels)} candidates ({sum(labels)} relevant) of the fit halves")
    print(f"intercept={intercept:.4f},")
    print("weights={" + ", ".join(f'"{k}": {v:.4f}' for k, v in weights.items()) + "},")
    for name, data in sets.items():
        print(name)
        for half in ("fit", "measure"):
            floors(data, intercept, weights, half, args.rank_by_confidence)


if __name__ == "__main__":
    main()
