"""`grandbo smoke --stage NAME` (a deployed stage, with the operator's AWS credentials) or
`grandbo smoke --local [--url URL]` (the local runner): what a new deploy must show, each
step printed with what it checked and how long it took; exit 1 naming the first step that
failed. It writes into the smoke organization, `grandbo-smoke`, and cleans up what it
wrote (the smoke entries are redacted); locally that organization is lent for the run
and purged at its end, so the local store keeps nothing of the check."""

from __future__ import annotations

import argparse
import sys

from grandbo.local.serving import API_URL, api_url, default_note
from grandbo.local.settings import Settings
from grandbo.smoke.organization import SMOKE_TENANT
from grandbo.smoke.steps import EMBED_WITHIN_S, INCIDENT_WITHIN_S, SmokeRun
from grandbo.smoke.targets import AwsStage, LocalRunner, SmokeTargetError, Target

LOCAL_URL = API_URL


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "smoke",
        help="prove a deployed stage (or the local runner) works, step by step",
        description="A query through the edge; a signed admin write, read and redaction "
        "of a marked smoke entry; an incident-closed event delivered and its entry found "
        "and embedded; a read served by a reader where the stage has one; with --notify, "
        "a test message to the alarm topic. Exit 1 names the first step that failed.",
    )
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument(
        "--stage", help="a deployed stage: reads the outputs of the stack Grandbo-STAGE"
    )
    where.add_argument(
        "--local", action="store_true", help="the local runner (`make run`), its keys on disk"
    )
    parser.add_argument("--region", help="the stage's AWS region (default: your profile's)")
    parser.add_argument(
        "--url",
        default=None,
        help=f"with --local: the runner's URL (default: where the runner serving this data "
        f"directory serves, else {LOCAL_URL}); it must read this data "
        "directory's keyring, through which the smoke organization's keys are lent",
    )
    parser.add_argument(
        "--tenant",
        help=f"the organization whose keys the check uses and whose memory it writes "
        f"(default: {SMOKE_TENANT}, the check's own; locally lent for the run and purged "
        "at its end; another keeps the check's tombstones, questions and growth, and the "
        "check says so)",
    )
    parser.add_argument(
        "--notify",
        action="store_true",
        help="also send a test message to the alarm topic's subscribers",
    )
    parser.add_argument(
        "--alarm-topic-arn", help="with --local and --notify: the topic to send it to"
    )
    parser.add_argument(
        "--embed-within",
        type=float,
        default=EMBED_WITHIN_S,
        help=f"seconds the incident's entry may take to be embedded "
        f"(default {EMBED_WITHIN_S:.0f}: the embed alarm's window)",
    )
    parser.add_argument(
        "--incident-within",
        type=float,
        default=INCIDENT_WITHIN_S,
        help=f"seconds the incident's entry may take to appear (default {INCIDENT_WITHIN_S:.0f})",
    )


def cmd_smoke(args: argparse.Namespace, settings: Settings) -> int:
    target: Target
    try:
        if args.stage:
            target = AwsStage(args.stage, region=args.region)
        else:
            note = default_note(settings.data_dir, args.url)
            if note:
                print(f"grandbo smoke: {note}", file=sys.stderr)
            target = LocalRunner.from_data_dir(
                api_url(settings.data_dir, args.url),
                settings.data_dir,
                alarm_topic_arn=args.alarm_topic_arn,
            )
    except SmokeTargetError as exc:
        print(f"FAIL stage        {exc}")
        print("smoke check failed at step: stage")
        return 1
    return SmokeRun(
        target,
        tenant=args.tenant or SMOKE_TENANT,
        notify=args.notify,
        embed_within_s=args.embed_within,
        incident_within_s=args.incident_within,
    ).run()
