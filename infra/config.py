"""Per-stage settings, chosen by `-c stage=dev|prod`."""

from __future__ import annotations

from dataclasses import dataclass


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
    ),
}


def stage_config(name: str) -> StageConfig:
    if name not in STAGES:
        raise ValueError(f"unknown stage {name!r}; use one of {sorted(STAGES)}")
    return STAGES[name]
