"""Migrations on every deploy: a custom resource whose handler applies pending migrations."""

from __future__ import annotations

import hashlib
from pathlib import Path

from aws_cdk import CustomResource
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr
from constructs import Construct

MIGRATIONS = Path(__file__).resolve().parents[1] / "shared" / "grandbo" / "migrations"


def migrations_digest() -> str:
    """Changes whenever a migration file changes, so CloudFormation re-runs the resource."""
    digest = hashlib.sha256()
    for path in sorted(MIGRATIONS.glob("*.sql")):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


class SchemaMigrations(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, function: lambda_.Function) -> None:
        super().__init__(scope, construct_id)
        provider = cr.Provider(
            self,
            "Provider",
            on_event_handler=function,
            log_group=logs.LogGroup(self, "ProviderLogs", retention=logs.RetentionDays.ONE_MONTH),
        )
        self.resource = CustomResource(
            self,
            "Schema",
            service_token=provider.service_token,
            resource_type="Custom::GrandboSchema",
            properties={"MigrationsDigest": migrations_digest()},
        )
