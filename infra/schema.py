"""Migrations on every deploy: a custom resource whose handler applies pending migrations,
once the database and its proxy can take connections; and the hourly HNSW index job."""

from __future__ import annotations

from aws_cdk import CustomResource, Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr
from constructs import Construct, IDependable

from grandbo.migrations import migrations_digest
from infra.checkov import ENV_KMS, LOG_GROUP_KMS, NOT_IN_VPC, UNCAPPED, skip_checks


class SchemaMigrations(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        function: lambda_.Function,
        index_function: lambda_.Function,
        database_ready: list[IDependable],
    ) -> None:
        super().__init__(scope, construct_id)
        provider = cr.Provider(
            self,
            "Provider",
            on_event_handler=function,
            log_group=logs.LogGroup(self, "ProviderLogs", retention=logs.RetentionDays.ONE_MONTH),
        )
        skip_checks(self.node.find_child("ProviderLogs"), LOG_GROUP_KMS)
        skip_checks(  # CDK's provider framework: relays the deploy to the migrations function
            provider.node.find_child("framework-onEvent"),
            NOT_IN_VPC,
            UNCAPPED,
            ENV_KMS,
            ("CKV_AWS_116", "invoked synchronously by CloudFormation, which fails the deploy"),
        )
        self.resource = CustomResource(
            self,
            "Schema",
            service_token=provider.service_token,
            resource_type="Custom::GrandboSchema",
            properties={"MigrationsDigest": migrations_digest()},
        )
        # The function reaches the database through the proxy's endpoint, which exists
        # before the proxy has a registered target: CloudFormation waits only for what a
        # resource depends on, so the migration waits for the target group (the writer
        # registered) and the writer instance, not only for the proxy's name.
        for ready in database_ready:
            self.resource.node.add_dependency(ready)
        # organizations that grow past the HNSW threshold between deploys get their index
        # within the hour, from their own function (never the deploy's)
        self.index_schedule = events.Rule(
            self,
            "HnswIndexSchedule",
            description="Ensure per-organization HNSW indexes "
            "(grandbo.memory.repository.vector_indexes)",
            schedule=events.Schedule.rate(Duration.hours(1)),
            targets=[targets.LambdaFunction(index_function, retry_attempts=0)],
        )
