"""`grandbo calibrate [--tenant T] [--sample N] [--json]`: measure each organization's
vector cutoff on its own lake (no labels), keep it, and report it
(`grandbo.memory.vectors.cutoff`)."""

from __future__ import annotations

import argparse
import json

from grandbo.errors import InvalidInputError
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
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def cmd_calibrate(args: argparse.Namespace, service: MemoryService) -> int:
    # one organization named is one that exists (the command line checked it)
    if args.tenant is not None:
        reports = [service.calibrate(args.tenant, sample=args.sample).as_dict()]
    else:  # every organization that can be: the others are named, and keep the default
        reports = []
        for tenant in service.repository.tenant_ids():
            try:
                reports.append(service.calibrate(tenant, sample=args.sample).as_dict())
            except InvalidInputError as exc:
                print(f"{tenant}: not calibrated, the model's default stays: {exc.message}")
    if args.json:
        print(json.dumps(reports, indent=2))
    for report in [] if args.json else reports:
        print(
            f"{report['tenant_id']}: cutoff {report['vector_cutoff']} (model default "
            f"{report['provider_default']}) from {report['sample_size']} entries; own "
            f"distance p50/p95 {report['own_p50']}/{report['own_p95']}, other entries' "
            f"p5/p50 {report['other_p5']}/{report['other_p50']}, separation "
            f"{report['separation']}"
        )
    return 0
