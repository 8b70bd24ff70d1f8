"""The embed queue (SQS + DLQ) and the EventBridge wiring: incident-closed rule, sweeper."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from grandbo.runtime.incident_queue import MAX_RECEIVES, VISIBILITY_TIMEOUT_S
from infra.checkov import skip_checks
from infra.config import StageConfig, incident_bus_name

EMBED_TIMEOUT_S = 60  # the embed function's timeout; see infra/functions.py
INCIDENT_SOURCE = "landfall.incidents"
INCIDENT_CLOSED = "IncidentClosed"


SQS_MANAGED_SSE = (
    "CKV_AWS_27",
    "encrypted at rest with SQS-managed keys (SqsManagedSseEnabled), which checkov does not "
    "read (it looks for a KMS key only)",
)


def dead_letter_queue(scope: Construct, construct_id: str) -> sqs.Queue:
    """A dead-letter queue: 14 days to inspect and redrive, encrypted, TLS only."""
    queue = sqs.Queue(
        scope,
        construct_id,
        retention_period=Duration.days(14),
        encryption=sqs.QueueEncryption.SQS_MANAGED,
        enforce_ssl=True,
    )
    skip_checks(queue, SQS_MANAGED_SSE)
    return queue


class EmbedQueue(Construct):
    """Visibility 6x the worker's timeout, redrive after 5 receives, encrypted, TLS only."""

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.dead_letters = dead_letter_queue(self, "EmbedDlq")
        self.queue = sqs.Queue(
            self,
            "EmbedQueue",
            visibility_timeout=Duration.seconds(6 * EMBED_TIMEOUT_S),
            retention_period=Duration.days(4),
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            dead_letter_queue=sqs.DeadLetterQueue(max_receive_count=5, queue=self.dead_letters),
        )
        skip_checks(self.queue, SQS_MANAGED_SSE)


class IncidentQueue(Construct):
    """Between the incident-closed rule and its function: 14 days' retention, a visibility
    timeout of 600 s (Lambda asks for at least six times the function's 30 s), and
    MAX_RECEIVES receives before the dead-letter queue; the function backs each failed
    record off (grandbo.runtime.incident_queue), and either way those receives span about
    two hours.

    https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-configure.html (visibility)
    https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-dead-letter-queues.html
    """

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.dead_letters = dead_letter_queue(self, "IncidentDlq")
        self.queue = sqs.Queue(
            self,
            "IncidentQueue",
            visibility_timeout=Duration.seconds(VISIBILITY_TIMEOUT_S),
            retention_period=Duration.days(14),
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            dead_letter_queue=sqs.DeadLetterQueue(
                max_receive_count=MAX_RECEIVES, queue=self.dead_letters
            ),
        )
        skip_checks(self.queue, SQS_MANAGED_SSE)


class EventWiring(Construct):
    """Incident-closed events → write-behind; schedule → sweeper; SQS → embed worker."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        embed_queue: EmbedQueue,
        incident_function: lambda_.Function,
        embed_function: lambda_.Function,
        backfill_function: lambda_.Function,
        stage: StageConfig,
    ) -> None:
        super().__init__(scope, construct_id)
        embed_function.add_event_source(
            sources.SqsEventSource(
                embed_queue.queue,
                batch_size=10,
                max_batching_window=Duration.seconds(2),
                report_batch_item_failures=True,
                max_concurrency=max(2, stage.embed_max_concurrency),
            )
        )
        # the stage's own bus: nothing of another stage in the account reaches this one
        self.incident_bus = events.EventBus(
            self, "IncidentBus", event_bus_name=incident_bus_name(stage)
        )
        # the rule → the incident queue → the function (issue 35, point 3): a function
        # invoked by EventBridge directly gets Lambda's two asynchronous retries (one and
        # two minutes on), and a failover longer than that dead-lettered every incident
        self.incidents = IncidentQueue(self, "Incidents")
        self.incident_dead_letters = self.incidents.dead_letters
        self.incident_rule = events.Rule(
            self,
            "IncidentClosedRule",
            description="Corroborated findings of closed incidents become memory entries",
            event_bus=self.incident_bus,
            event_pattern=events.EventPattern(
                source=[INCIDENT_SOURCE], detail_type=[INCIDENT_CLOSED]
            ),
            targets=[
                # the message body is the event; a delivery SQS refuses (its policy, an
                # outage of SQS itself) is retried for a day, then dead-lettered alike
                targets.SqsQueue(
                    self.incidents.queue,
                    dead_letter_queue=self.incident_dead_letters,
                    retry_attempts=8,
                    max_event_age=Duration.hours(24),
                )
            ],
        )
        incident_function.add_event_source(
            sources.SqsEventSource(
                self.incidents.queue,
                batch_size=5,
                report_batch_item_failures=True,
                max_concurrency=max(2, min(5, stage.reserved_concurrency.get("incident", 5))),
            )
        )
        incident_function.add_environment(
            "GRANDBO_INCIDENT_QUEUE_URL", self.incidents.queue.queue_url
        )
        incident_function.add_environment(
            "GRANDBO_INCIDENT_DLQ_URL", self.incident_dead_letters.queue_url
        )
        # what can never be recorded goes to the dead-letter queue at once, with its reason
        self.incident_dead_letters.grant_send_messages(incident_function)
        # a lost week of incident-closed events can be replayed from here (docs/OPERATIONS.md)
        self.incident_archive = events.Archive(
            self,
            "IncidentClosedArchive",
            source_event_bus=self.incident_bus,
            event_pattern=events.EventPattern(
                source=[INCIDENT_SOURCE], detail_type=[INCIDENT_CLOSED]
            ),
            retention=Duration.days(stage.incident_archive_days),
            description="incident-closed events, for replay",
        )
        # CDK writes KmsKeyIdentifier: "" when no key is given, which some regions refuse
        # at deploy (aws-cdk issue 37847); without the property the archive uses an AWS
        # owned key, as intended
        archive = self.incident_archive.node.default_child
        assert isinstance(archive, events.CfnArchive)
        archive.add_property_deletion_override("KmsKeyIdentifier")
        self.sweeper_rule = events.Rule(
            self,
            "SweeperSchedule",
            description="Enqueue every entry lacking a current vector",
            schedule=events.Schedule.rate(Duration.minutes(stage.sweeper_minutes)),
            targets=[targets.LambdaFunction(backfill_function, retry_attempts=2)],
        )
