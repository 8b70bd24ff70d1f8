"""Per-stage settings, chosen by `-c stage=dev|prod`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

# AWS WAF counts a rate-based rule's requests over this window (its default, 5 minutes)
WAF_RATE_WINDOW_S = 300


@dataclass(frozen=True)
class StageConfig:
    name: str
    min_acu: float
    max_acu: float
    backup_days: int
    deletion_protection: bool
    retain_data: bool
    api_rate_limit: int
    api_burst_limit: int
    log_retention_days: int
    # The embed worker's ceiling protects Aurora's connections and Bedrock's quota.
    embed_max_concurrency: int
    sweeper_minutes: int
    # how far back incident-closed events can be replayed from the EventBridge archive
    incident_archive_days: int
    # a Serverless v2 reader in the failover tier
    failover_reader: bool
    # refuse to synthesize unless the alarms reach someone (-c alarm_email or
    # -c alarm_topic_arn): prod's alarms must page a person
    alarm_subscriber_required: bool = False
    # reserved concurrency per function (infra/functions.py names): none in dev, since
    # Lambda keeps 100 of an account's concurrency unreserved and a new account's quota can
    # be 10 ("You can reserve up to the Unreserved account concurrency value that is
    # shown, minus 100": https://docs.aws.amazon.com/lambda/latest/dg/configuration-concurrency.html)
    reserved_concurrency: Mapping[str, int] = field(default_factory=dict)


STAGES = {
    "dev": StageConfig(
        name="dev",
        min_acu=0.5,
        max_acu=2,
        backup_days=7,
        deletion_protection=False,
        retain_data=False,
        api_rate_limit=20,
        api_burst_limit=40,
        log_retention_days=14,
        embed_max_concurrency=2,
        sweeper_minutes=30,
        incident_archive_days=14,
        failover_reader=False,
    ),
    "prod": StageConfig(
        name="prod",
        min_acu=0.5,
        max_acu=8,
        backup_days=35,
        deletion_protection=True,
        retain_data=True,
        api_rate_limit=200,
        api_burst_limit=400,
        log_retention_days=90,
        embed_max_concurrency=5,
        sweeper_minutes=15,
        incident_archive_days=90,
        failover_reader=True,
        alarm_subscriber_required=True,
        # the account needs 100 + their sum (113) of concurrency: docs/OPERATIONS.md
        reserved_concurrency={"incident": 10, "backfill": 1, "migrations": 1, "index": 1},
    ),
}


def incident_bus_name(stage: StageConfig) -> str:
    """Each stage's own event bus, where the incident platform publishes its closed
    incidents: a rule or an archive on the shared default bus would match every stage's
    events (dev ingesting prod's incidents), so nothing of Grandbo listens there."""
    return f"grandbo-{stage.name}-incidents"


def stage_config(name: str) -> StageConfig:
    if name not in STAGES:
        raise ValueError(f"unknown stage {name!r}; use one of {sorted(STAGES)}")
    return STAGES[name]
