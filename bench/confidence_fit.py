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
import math
import statistics
from pathlib import Path
from typing import Any

from grandbo.memory.domain import measures
from grandbo.memory.domain.logistic import sigmoid
from grandbo.memory.read.confidence.model import fit_logistic
from grandbo.memory.read.confidence.signals import FEATURES, KEYWORD_FEATURES

FLOORS = (0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.1, 0.2)


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


Row = tuple[list[float], int, str, str]


def regime_rows(data: dict[str, Any], regime: str) -> list[Row]:
    """(features, label, query, half) of the candidates scored in `regime` (`complete`:
    by the provider's model; `keywords`: by the keyword model, the vector leg off). A
    query is named with its shape (`shape:id`) where the samples hold several: the same
    question in two shapes is two answers, in the same half."""
    n = len(data["labels"])
    regimes = data.get("regimes") or ["complete"] * n
    shapes = data.get("shapes") or ["full"] * n
    return [
        (x, y, f"{s}:{q}", h)
        for x, y, q, h, r, s in zip(
            data["features"],
            data["labels"],
            data["queries"],
            data["halves"],
            regimes,
            shapes,
            strict=True,
        )
        if r == regime
    ]


def relevant_of(data: dict[str, Any], query: str) -> int:
    return int(data["relevant"][query.split(":", 1)[1]])


def auroc(positives: list[float], negatives: list[float]) -> float:
    found = measures.auroc(positives, negatives)
    return float("nan") if found is None else found


def calibration_error(pairs: list[tuple[float, int]]) -> float:
    found = measures.calibration_error([c for c, _ in pairs], [o for _, o in pairs])
    return float("nan") if found is None else found


def measure(
    data: dict[str, Any],
    intercept: float,
    weights: dict[str, float],
    half: str,
    by_confidence: bool,
    regime: str,
    shape: str | None,
    floor: float,
) -> dict[str, float]:
    """What the model serves `shape`'s queries of `half` at `floor` (no collapse): the
    unanswerable queries' mean hits, recall@5 unfiltered and served, the top confidence's
    AUROC (right first against unanswerable) and the top hit's calibration error."""
    by_query: dict[str, list[tuple[float, int, int]]] = {}
    for place, (x, y, q, h) in enumerate(regime_rows(data, regime)):
        if h == half and (shape is None or q.startswith(shape + ":")):
            p = sigmoid(
                intercept + sum(weights.get(f, 0.0) * v for f, v in zip(FEATURES, x, strict=True))
            )
            by_query.setdefault(q, []).append((p, y, place))
    hits, recall, today, right_first, unheld, tops, mrr = [], [], [], [], [], [], []
    for q, rows in by_query.items():
        fused = sorted(rows, key=lambda r: r[2])
        ranked = sorted(rows, key=lambda r: (-r[0], r[2])) if by_confidence else fused
        served = [r for r in ranked if round(r[0], 4) >= floor][:5]
        relevant = relevant_of(data, q)
        top = ranked[0]
        tops.append((top[0], top[1]))
        if relevant:
            recall.append(sum(y for _, y, _ in served) / relevant)
            mrr.append(next((1 / i for i, r in enumerate(served, start=1) if r[1]), 0.0))
            today.append(sum(y for _, y, _ in fused[:5]) / relevant)
            if top[1]:
                right_first.append(top[0])
        else:
            hits.append(len(served))
            unheld.append(top[0])
    return {
        "queries": len(by_query),
        "hits": statistics.fmean(hits) if hits else float("nan"),
        "today": statistics.fmean(today) if today else float("nan"),
        "recall": statistics.fmean(recall) if recall else float("nan"),
        "mrr": statistics.fmean(mrr) if mrr else float("nan"),
        "auroc": auroc(right_first, unheld),
        "calibration": calibration_error(tops) if tops else float("nan"),
    }


def shapes_of(data: dict[str, Any]) -> list[str]:
    return list(dict.fromkeys(data.get("shapes") or ["full"]))


def report(
    sets: dict[str, dict[str, Any]],
    intercept: float,
    weights: dict[str, float],
    by_confidence: bool,
    regime: str,
    floor: float,
) -> None:
    """Each set's and shape's figures on both halves at `floor`."""
    for name, data in sets.items():
        for shape in shapes_of(data):
            for half in ("fit", "measure"):
                m = measure(data, intercept, weights, half, by_confidence, regime, shape, floor)
                print(
                    f"  {name[:24]:<24} {shape:<9} {half:<7} n {m['queries']:>3}  "
                    f"hits {m['hits']:.2f}  recall@5 {m['today']:.3f} -> {m['recall']:.3f} "
                    f"({m['recall'] - m['today']:+.3f}) MRR {m['mrr']:.3f}  "
                    f"AUROC {m['auroc']:.3f}  "
                    f"calibration {m['calibration']:.3f}"
                )


def floors(
    data: dict[str, Any],
    intercept: float,
    weights: dict[str, float],
    half: str,
    by_confidence: bool,
    regime: str,
) -> None:
    for shape in shapes_of(data):
        print(f"  {half} / {shape}:")
        for floor in FLOORS:
            m = measure(data, intercept, weights, half, by_confidence, regime, shape, floor)
            print(
                f"    floor {floor:<6} unanswerable mean hits {m['hits']:.2f}"
                f"  answerable recall@5 {m['recall']:.3f} (of {m['today']:.3f})"
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
    parser.add_argument(
        "--floor",
        type=float,
        help="report every set, shape and half at this floor (AUROC, calibration, "
        "hits, recall) instead of the floor curve",
    )
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        help="fit with only these signals (repeatable; default: every signal of the regime)",
    )
    parser.add_argument(
        "--top",
        type=int,
        help="fit on each query's first N candidates in the fused order only (what an "
        "answer can serve), not on every candidate of both legs",
    )
    args = parser.parse_args()
    sets = {path.name: load(path) for path in args.samples}
    names = tuple(
        name
        for name in (FEATURES if args.regime == "complete" else KEYWORD_FEATURES)
        if name not in args.drop and (not args.only or name in args.only)
    )
    columns = [FEATURES.index(name) for name in names]
    features, labels = [], []
    place_column = FEATURES.index("fused_place")
    for data in sets.values():
        for x, y, _, h in regime_rows(data, args.regime):
            # fused_place is log(place + 1): the first `top` are under log(top + 1)
            if h == "fit" and (args.top is None or x[place_column] < math.log(args.top + 0.5)):
                features.append([x[c] for c in columns])
                labels.append(y)
    intercept, weights = fit_logistic(features, labels, l2=args.l2, names=names)
    print(f"fit on {len(labels)} candidates ({sum(labels)} relevant) of the fit halves")
    print(f"intercept={intercept:.4f},")
    print("weights={" + ", ".join(f'"{k}": {v:.4f}' for k, v in weights.items()) + "},")
    if args.floor is not None:
        report(sets, intercept, weights, args.rank_by_confidence, args.regime, args.floor)
        return
    for name, data in sets.items():
        print(name)
        for half in ("fit", "measure"):
            floors(data, intercept, weights, half, args.rank_by_confidence, args.regime)


if __name__ == "__main__":
    main()
