"""`grandbo calibrate [--tenant T] [--sample N] [--cutoff-only] [--json]`: measure each
organization's vector cutoff on its own lake (no labels), then fit its confidence model
from questions made from the same lake, keep both, and report them
(`grandbo.memory.vectors.cutoff`, `grandbo.memory.lifecycle.confidence_fit`)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from grandbo.errors import GrandboError, InvalidInputError
from grandbo.memory.lifecycle.confidence_fit import DEFAULT_SAMPLE, fit_confidence
from grandbo.memory.service import MemoryService
from grandbo.memory.vectors.cutoff import DEFAULT_CALIBRATION_SAMPLE


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "calibrate",
        help="measure and keep each organization's vector cutoff (no labels needed)",
        description="For a sample of entries: each title's distance to its own entry's "
        "vector against its distance to another entry's; the cutoff that separates them "
        "best is kept per organization and model and used by its queries.",
    )
    parser.add_argument("--tenant", help="one organization (default: every one)")
    parser.add_argument(
        "--sample",
        type=int,
        default=DEFAULT_CALIBRATION_SAMPLE,
        help="how many titles to sample (20-1000)",
    )
    parser.add_argument(
        "--questions-from",
        type=int,
        default=DEFAULT_SAMPLE,
        metavar="N",
        help="how many entries the confidence fit makes questions from (60-2000)",
    )
    parser.add_argument(
        "--cutoff-only",
        action="store_true",
        help="measure the cutoff only, not the confidence model",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def cmd_calibrate(args: argparse.Namespace, service: MemoryService) -> int:
    # one organization named is one that exists (the command line checked it)
    if args.tenant is not None:
        reports = [service.calibrate(args.tenant, sample=args.sample).as_dict()]
        tenants = [args.tenant]
    else:  # every organization that can be: the others are named, and keep the default
        reports = []
        tenants = service.repository.tenant_ids()
        for tenant in tenants:
            try:
                reports.append(service.calibrate(tenant, sample=args.sample).as_dict())
            except InvalidInputError as exc:
                print(f"{tenant}: not calibrated, the model's default stays: {exc.message}")
    fits: list[dict[str, Any]] = []
    for tenant in [] if args.cutoff_only else tenants:
        try:
            fits.append(fit_confidence(service, tenant, sample=args.questions_from).as_dict())
        except GrandboError as exc:  # one organization's failure never stops the others
            print(f"{tenant}: confidence not fitted, the model serving stays: {exc}")
    if args.json:
        print(json.dumps({"cutoffs": reports, "confidence": fits} if fits else reports, indent=2))
        return 0
    for report in reports:
        print(
            f"{report['tenant_id']}: cutoff {report['vector_cutoff']} (model default "
            f"{report['provider_default']}) from {report['sample_size']} entries; own "
            f"distance p50/p95 {report['own_p50']}/{report['own_p95']}, other entries' "
            f"p5/p50 {report['other_p5']}/{report['other_p50']}, separation "
            f"{report['separation']}"
        )
    for fit in fits:
        print(_fit_line(fit))
    return 0


def _fit_line(fit: dict[str, Any]) -> str:
    """One organization's confidence fit, in a sentence and its figures."""
    line = f"{fit['tenant_id']}: confidence {fit['reason']}"
    mine, shipped = fit["fitted"], fit["shipped"]
    if mine is not None and shipped is not None:
        line += (
            f". On {mine['questions']} questions it was not fit on: AUROC {mine['auroc']} "
            f"({fit['shipped_name']} {shipped['auroc']}), calibration {mine['calibration']} "
            f"({shipped['calibration']}), hits where nothing is close "
            f"{mine['unanswerable_hits']} ({shipped['unanswerable_hits']})"
        )
    return line
