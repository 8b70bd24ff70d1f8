"""`grandbo eval`: retrieval quality on a BEIR-format folder (recall, nDCG, the sweep, the
no-answer measure, the replay), on a throwaway embedded store unless told otherwise."""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path

from grandbo.commands.common import settings_from
from grandbo.commands.progress import terminal_progress
from grandbo.embedding.rerank import reranker_named
from grandbo.local.bootstrap import open_service


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ev = sub.add_parser("eval", help="retrieval quality on a BEIR-format folder")
    ev.add_argument("folder", help="a BEIR-format folder (corpus.jsonl, queries.jsonl, qrels/)")
    ev.add_argument("--task", default="symptom", help="the qrels file to score: qrels/TASK.tsv")
    ev.add_argument("--json", help="also write the report as JSON to this file")
    ev.add_argument(
        "--sweep",
        type=float,
        action="append",
        help="also score hybrid at this vector cutoff (repeatable)",
    )
    ev.add_argument(
        "--ignore-own",
        choices=("auto", "yes", "no"),
        default="auto",
        help="ignore the corpus document that is the query itself (auto: unless the "
        "qrels name it relevant)",
    )
    ev.add_argument(
        "--calibrate",
        action="store_true",
        help="also report the cutoff `grandbo calibrate` derives from the corpus (no labels)",
    )
    ev.add_argument(
        "--replay",
        action="store_true",
        help="replay the incidents in date order, each query seeing only earlier ones "
        "(the task's queries name their own incident; relevant: earlier incidents "
        "sharing a root-cause label)",
    )
    ev.add_argument(
        "--reranker",
        help="hybrid reranked by this reranker ('bedrock:<model ARN>', AWS credentials "
        "needed; without them every query serves the fused order and the report says so)",
    )
    ev.add_argument(
        "--no-answer",
        action="store_true",
        help="remove the relevant documents of half the queries (by a hash of their id) "
        "and report what memory answers them: hits, confidence AUROC and calibration "
        "beside today's fused five (docs/EVAL.md)",
    )
    ev.add_argument(
        "--min-confidence",
        type=float,
        help="with --no-answer: the floor to measure (default: the model's)",
    )
    ev.add_argument(
        "--topic-words",
        type=int,
        help="with --no-answer: cut every query to its first N words (a Beacon topic is ~12)",
    )
    ev.add_argument(
        "--samples",
        help="with --no-answer: also write every candidate's features and label here "
        "(what `python -m bench.confidence_fit` fits a model from)",
    )
    ev.add_argument(
        "--self-fit",
        action="store_true",
        help="with --no-answer: score with a confidence model fitted from the loaded lake "
        "itself (questions made from its entries, no labels: `grandbo calibrate`'s fit) "
        "instead of the shipped one, its own figures beside",
    )
    ev.add_argument(
        "--shapes",
        help="a folder of the same queries in other shapes (queries_TASK.SHAPE.jsonl, the "
        "same ids: eval/shapes/<set> holds a sentence and a terse form of each), asked on "
        "the same load and reported beside the set's own",
    )
    ev.add_argument(
        "--no-consolidation",
        action="store_true",
        help="merge no recurrences and collapse no hits (the before of docs/EVAL.md)",
    )


def cmd_eval(args: argparse.Namespace) -> int:
    from grandbo.evaluation import format_table, run_eval

    settings = settings_from(args)
    scratch: Path | None = None
    if not settings.database_url and not args.data_dir:
        # a throwaway embedded server: events are append-only, eval tenants must not linger
        scratch = Path(tempfile.mkdtemp(prefix="grandbo-eval-"))
        settings = settings.model_copy(update={"data_dir": scratch})
    try:
        with open_service(settings) as service:
            if args.no_consolidation:  # the baseline: every document its own entry and hit
                service.provider.duplicate_distance = None
            if args.reranker:  # needs AWS credentials; fails open (and says so) without
                service.reranker = reranker_named(args.reranker)
            if args.no_answer:
                from grandbo.evaluation_no_answer import format_no_answer, run_no_answer_eval

                report, samples = run_no_answer_eval(
                    service,
                    Path(args.folder),
                    args.task,
                    min_confidence=args.min_confidence,
                    topic_words=args.topic_words,
                    progress=terminal_progress,
                    shapes=None if args.shapes is None else Path(args.shapes),
                    self_fit=args.self_fit,
                )
                if args.samples:
                    Path(args.samples).write_text(json.dumps(samples.as_dict()) + "\n")
                    print(f"candidates' features written to {args.samples}")
                print(format_no_answer(report))
                if args.json:
                    Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
                    print(f"JSON report written to {args.json}")
                return 0
            if args.replay:
                from grandbo.replay import run_replay

                report = run_replay(
                    service, Path(args.folder), task=args.task, progress=terminal_progress
                )
            else:
                report = run_eval(
                    service,
                    Path(args.folder),
                    args.task,
                    cutoffs=args.sweep or (),
                    ignore_own=args.ignore_own,
                    progress=terminal_progress,
                    calibrate=args.calibrate,
                    shapes=None if args.shapes is None else Path(args.shapes),
                )
    finally:
        if scratch is not None:
            from grandbo.local.postgres import stop_embedded_postgres

            stop_embedded_postgres(scratch)
            shutil.rmtree(scratch, ignore_errors=True)
    print(format_table(report))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
        print(f"JSON report written to {args.json}")
    return 0
