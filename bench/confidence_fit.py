"""Fit the confidence model from `grandbo eval --no-answer --samples` files.

    grandbo eval ../shared/eval/cloud_postmortems --task symptom --no-answer \\
        --samples /tmp/samples_symptom.json
    grandbo eval ../shared/eval/gitbugs_hadoop --task duplicate --no-answer \\
        --samples /tmp/samples_duplicate.json
    python -m bench.confidence_fit /tmp/samples_symptom.json /tmp/samples_duplicate.json
    python -m bench.confidence_fit --regime keywords /tmp/samples_symptom.json \
        /tmp/samples_duplicate.json

Pools the `fit` half of every file's queries (`grandbo.evaluation_no_answer.fit_half`),
fits the logistic model (`fit_logistic`, L2 1.0), prints its coefficients as the
`ConfidenceModel` to paste into `grandbo.memory.read.confidence.fitted`, and, for each file
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

from grandbo.memory.domain.logistic import sigmoid
from grandbo.memory.read.confidence.model import fit_logistic
from grandbo.memory.read.confidence.signals import FEATURES, KEYWORD_FEATURES

FLOORS = (0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.1, 0.2)


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def regime_rows(data: dict[str, Any], regime: str) -> list[tuple[list[float], int, str, str]]:
    """(features, label, query, half) of the candidates scored in `regime` (`complete`:
    by the provider's model; `keywords`: by the keyword model, the vector leg off)."""
    regimes = data.get("regimes") or ["complete"] * len(data["labels"])
    return [
        (x, y, q, h)
        for x, y, q, h, r in zip(
            data["features"], data["labels"], data["queries"], data["halves"], regimes, strict=True
        )
        if r == regime
    ]


def floors(
    data: dict[str, Any],
    intercept: float,
    weights: dict[str, float],
    half: str,
    by_confidence: bool,
    regime: str,
) -> None:
    by_query: dict[str, list[tuple[float, int, int]]] = {}
    for place, (x, y, q, h) in enumerate(regime_rows(data, regime)):
        if h == half:
            p = sigmoid(
                intercept + sum(weights.get(f, 0.0) * v for f, v in zip(FEATURES, x, strict=True))
            )
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
    parser.add_argument(
        "--regime",
        choices=("complete", "keywords"),
        default="complete",
        help="fit the provider's model (complete searches) or the keyword model (the "
        "candidates the meaning leg could not see, on their keyword-only signals)",
    )
    parser.add_argument(
        "--drop",
        action="append",
        default=[],
        choices=FEATURES,
        help="fit without this signal (repeatable): what it adds, measured",
    )
    args = parser.parse_args()
    sets = {path.name: load(path) for path in args.samples}
    names = tuple(
        name
        for name in (FEATURES if args.regime == "complete" else KEYWORD_FEATURES)
        if name not in args.drop
    )
    columns = [FEATURES.index(name) for name in names]
    features, labels = [], []
    for data in sets.values():
        for x, y, _, h in regime_rows(data, args.regime):
            if h == "fit":
                features.append([x[c] for c in columns])
                labels.append(y)
    intercept, weights = fit_logistic(features, labels, l2=args.l2, names=names)
    print(f"fit on {len(labels)} candidates ({sum(labels)} relevant) of the fit halves")
    print(f"intercept={intercept:.4f},")
    print("weights={" + ", ".join(f'"{k}": {v:.4f}' for k, v in weights.items()) + "},")
    for name, data in sets.items():
        print(name)
        for half in ("fit", "measure"):
            floors(data, intercept, weights, half, args.rank_by_confidence, args.regime)


if __name__ == "__main__":
    main()
