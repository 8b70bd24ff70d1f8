"""GrandboStack: the whole service for one stage, with cdk-nag suppressions justified."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import CfnOutput, CfnResource, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sns as sns
from cdk_nag import NagPackSuppression, NagSuppressions
from constructs import Construct, IConstruct

from infra.alarms import Alarms
from infra.api import MemoryApi
from infra.checkov import LOG_GROUP_KMS, NOT_IN_VPC, UNCAPPED, skip_checks
from infra.config import StageConfig
from infra.dashboard import OperationsDashboard, dashboard_name
from infra.database import Database
from infra.functions import RERANKER_CONTEXT, Functions
from infra.messaging import EmbedQueue, EventWiring
from infra.network import Network
from infra.retention import retention
from infra.schema import SchemaMigrations


def replay_prefix(stage: StageConfig) -> str:
    """The runbook names a stage's replays with this prefix: its operator may start,
    describe and cancel those only (a replay's name is unique per account and region)."""
    return f"grandbo-{stage.name}-replay-"


def operator_policy(
    scope: Construct,
    fns: dict[str, lambda_.Function],
    embed: EmbedQueue,
    wiring: EventWiring,
    stage: StageConfig,
    smoke: SmokeResources,
) -> iam.ManagedPolicy:
    """Least privilege for the runbook: invoke the sweeper and the index job, move the
    embed and incident dead letters back onto their queues, replay archived
    incident-closed events, and run `grandbo smoke`; nothing else."""
    stack = Stack.of(scope)
    replays = stack.format_arn(
        service="events", resource="replay", resource_name=f"{replay_prefix(stage)}*"
    )
    return iam.ManagedPolicy(
        scope,
        "OperatorReplayPolicy",
        description="Grandbo runbook: backfill, redrive the DLQs, replay incidents, smoke checks",
        statements=[
            # the runbook invokes the sweeper (backfills) and the index job (an index
            # rebuilt at once after an upgrade: docs/OPERATIONS.md)
            iam.PolicyStatement(
                actions=["lambda:InvokeFunction"],
                resources=[fns["backfill"].function_arn, fns["index"].function_arn],
            ),
            iam.PolicyStatement(
                actions=[
                    "sqs:StartMessageMoveTask",
                    "sqs:ListMessageMoveTasks",
                    "sqs:CancelMessageMoveTask",
                    "sqs:ReceiveMessage",
                    "sqs:DeleteMessage",
                    "sqs:GetQueueAttributes",
                ],
                resources=[embed.dead_letters.queue_arn, wiring.incident_dead_letters.queue_arn],
            ),
            # a move task sends as the operator: SendMessage on each destination
            iam.PolicyStatement(
                actions=["sqs:SendMessage", "sqs:GetQueueAttributes"],
                resources=[embed.queue.queue_arn, wiring.incidents.queue.queue_arn],
            ),
            # The Service Authorization Reference for EventBridge gives each replay action
            # its resource type: StartReplay acts on the archive it replays from
            # (archive*), DescribeReplay and CancelReplay on the replay (replay*):
            # https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazoneventbridge.html
            iam.PolicyStatement(
                actions=["events:StartReplay"],
                resources=[wiring.incident_archive.archive_arn, replays],
            ),
            iam.PolicyStatement(
                actions=["events:DescribeReplay", "events:CancelReplay"], resources=[replays]
            ),
            iam.PolicyStatement(
                actions=["events:DescribeArchive"],
                resources=[wiring.incident_archive.archive_arn],
            ),
            # `grandbo smoke --stage` (docs/OPERATIONS.md): the stack's outputs, the
            # keyring, an incident-closed event on the stage's bus, and with --notify a
            # test message on the alarm topic, encrypted with its key
            iam.PolicyStatement(
                actions=["cloudformation:DescribeStacks"],
                resources=[
                    stack.format_arn(
                        service="cloudformation",
                        resource="stack",
                        resource_name=f"{stack.stack_name}/*",
                    )
                ],
            ),
            iam.PolicyStatement(
                actions=["secretsmanager:GetSecretValue"], resources=[smoke.keyring.secret_arn]
            ),
            iam.PolicyStatement(
                actions=["events:PutEvents"], resources=[wiring.incident_bus.event_bus_arn]
            ),
            iam.PolicyStatement(actions=["sns:Publish"], resources=[smoke.topic.topic_arn]),
            iam.PolicyStatement(
                actions=["kms:GenerateDataKey*", "kms:Decrypt"], resources=[smoke.key.key_arn]
            ),
        ],
    )


@dataclass(frozen=True)
class SmokeResources:
    """What `grandbo smoke` reads and writes beyond the API: the keyring and the alarm
    topic with its key."""

    keyring: secretsmanager.ISecret
    topic: sns.ITopic
    key: kms.IKey


class GrandboStack(Stack):
    def __init__(
        self, scope: Construct, construct_id: str, *, stage: StageConfig, **kwargs: object
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)  # type: ignore[arg-type]
        self.stage = stage
        self.network = Network(
            self, "Network", rerank=self.node.try_get_context(RERANKER_CONTEXT) is not None
        )
        self.database = Database(self, "Database", network=self.network, stage=stage)
        self.embed = EmbedQueue(self, "Embed")
        self.functions = Functions(
            self,
            "Functions",
            network=self.network,
            database=self.database,
            embed_queue=self.embed.queue,
            stage=stage,
        )
        fns = self.functions.functions
        self.schema = SchemaMigrations(
            self,
            "Migrations",
            function=fns["migrations"],
            index_function=fns["index"],
            # the function reads both database secrets first, through this endpoint: a
            # migration run before it is available fails the first deploy
            database_ready=[*self.database.ready, self.network.endpoints["SecretsManager"]],
        )
        for name, function in fns.items():
            if name != "migrations":
                function.node.add_dependency(self.schema.resource)
        self.events = EventWiring(
            self,
            "Events",
            embed_queue=self.embed,
            incident_function=fns["incident"],
            embed_function=fns["embed"],
            backfill_function=fns["backfill"],
            stage=stage,
        )
        self.api = MemoryApi(
            self,
            "Api",
            query_function=fns["query"],
            admin_function=fns["admin"],
            authorizer_function=fns["authorizer"],
            stage=stage,
        )
        self.alarms = Alarms(
            self,
            "Alarms",
            dead_letter_queues={
                "Embed": self.embed.dead_letters,
                "IncidentClosed": self.events.incident_dead_letters,
            },
            embed_queue=self.embed.queue,
            incident_queue=self.events.incidents.queue,
            functions=fns,
            api=self.api.api,
            cluster=self.database.cluster,
            proxy=self.database.proxy,
            stage=stage,
            alarm_email=self.node.try_get_context("alarm_email"),
            alarm_topic_arn=self.node.try_get_context("alarm_topic_arn"),
            reads_scale_out=self.database.read_endpoint is not None,
        )
        self.dashboard = OperationsDashboard(
            self,
            "Dashboard",
            stage=stage,
            api=self.api.api,
            functions=fns,
            embed_queue=self.embed.queue,
            embed_dead_letters=self.embed.dead_letters,
            incident_queue=self.events.incidents.queue,
            incident_dead_letters=self.events.incident_dead_letters,
            cluster=self.database.cluster,
            proxy=self.database.proxy,
        )
        CfnOutput(self, "ApiUrl", value=self.api.api.url)
        CfnOutput(self, "DashboardName", value=dashboard_name(stage))
        CfnOutput(self, "KeyringSecretArn", value=self.functions.keyring.secret_arn)
        CfnOutput(
            self,
            "AdminIamRoutesArn",
            value=self.api.iam_admin_arn,
            description="grant execute-api:Invoke on this in each Identity Center permission "
            "set of Grandbo's people (docs/OPERATIONS.md)",
        )
        CfnOutput(self, "AlarmTopicArn", value=self.alarms.topic.topic_arn)
        # `grandbo smoke` checks a reader served the searches where the stage has one
        CfnOutput(
            self,
            "ReadsScaleOut",
            value="true" if self.database.read_endpoint is not None else "false",
        )
        # what an operator replays with (docs/OPERATIONS.md), without reading the code
        CfnOutput(self, "EmbedQueueUrl", value=self.embed.queue.queue_url)
        CfnOutput(self, "EmbedDeadLetterQueueArn", value=self.embed.dead_letters.queue_arn)
        CfnOutput(self, "EmbedDeadLetterQueueUrl", value=self.embed.dead_letters.queue_url)
        CfnOutput(self, "IncidentQueueArn", value=self.events.incidents.queue.queue_arn)
        CfnOutput(
            self, "IncidentDeadLetterQueueUrl", value=self.events.incident_dead_letters.queue_url
        )
        CfnOutput(
            self, "IncidentDeadLetterQueueArn", value=self.events.incident_dead_letters.queue_arn
        )
        CfnOutput(self, "IncidentArchiveArn", value=self.events.incident_archive.archive_arn)
        CfnOutput(self, "IncidentRuleArn", value=self.events.incident_rule.rule_arn)
        # where the incident platform publishes this stage's closed incidents
        CfnOutput(self, "IncidentBusName", value=self.events.incident_bus.event_bus_name)
        CfnOutput(self, "IncidentBusArn", value=self.events.incident_bus.event_bus_arn)
        CfnOutput(self, "ReplayNamePrefix", value=replay_prefix(stage))
        for name in ("backfill", "incident", "embed", "index"):
            CfnOutput(self, f"{name.title()}FunctionName", value=fns[name].function_name)
        # where an asynchronous runbook invocation's outcome is read (docs/OPERATIONS.md)
        for name in ("backfill", "index"):
            CfnOutput(
                self,
                f"{name.title()}LogGroupName",
                value=fns[name].log_group.log_group_name,
            )
        self.operator_policy = operator_policy(
            self,
            fns,
            self.embed,
            self.events,
            stage,
            SmokeResources(self.functions.keyring, self.alarms.topic, self.alarms.key),
        )
        CfnOutput(self, "OperatorPolicyArn", value=self.operator_policy.managed_policy_arn)
        self._justify_suppressions()

    def _keep_helper_logs_for(self, helper: IConstruct) -> None:
        """A CDK helper function logs to a group of ours with the stage's retention (left
        alone, Lambda creates `/aws/lambda/<name>` that keeps its logs for ever)."""
        group = logs.LogGroup(
            self, "CdkHelperLogs", retention=retention(self.stage.log_retention_days)
        )
        skip_checks(group, LOG_GROUP_KMS)
        assert isinstance(helper, CfnResource)
        helper.add_property_override("LoggingConfig.LogGroup", group.log_group_name)

    def _justify_suppressions(self) -> None:
        """Each suppression says why the rule does not apply or what replaces it."""
        managed_role = NagPackSuppression(
            id="AwsSolutions-IAM4",
            reason="AWSLambdaBasicExecutionRole / AWSLambdaVPCAccessExecutionRole are the "
            "AWS-maintained minimum for Lambda logging and VPC ENIs; the API Gateway "
            "CloudWatch role uses the AWS-managed push-to-logs policy.",
        )
        scoped_wildcards = NagPackSuppression(
            id="AwsSolutions-IAM5",
            reason="Wildcards come from CDK grants scoped to one resource (X-Ray "
            "PutTraceSegments has no resource-level permissions; the custom-resource "
            "provider invokes its own handler's versions; log retention edits log groups "
            "named after the functions).",
        )
        runtime = NagPackSuppression(
            id="AwsSolutions-L1",
            reason="Python 3.11 by default: the interpreter the test suite runs, so Lambda "
            "runs the code the suite ran. `-c python=3.13` deploys Python 3.13 (the same "
            "dependency versions from their cp313 wheels, infra/layer-py313.lock) from a "
            "machine with a 3.13 interpreter, which compiles the layer's bytecode.",
        )
        # each on the constructs it applies to, with its children, never on the whole stack
        for construct, rules in (
            (self.functions, [managed_role, scoped_wildcards, runtime]),
            (self.schema, [managed_role, scoped_wildcards, runtime]),
            (self.api.api, [managed_role]),
        ):
            NagSuppressions.add_resource_suppressions(construct, rules, apply_to_children=True)
        NagSuppressions.add_resource_suppressions(
            self.operator_policy,
            [
                NagPackSuppression(
                    id="AwsSolutions-IAM5",
                    reason="A replay is named when it is started: the runbook's replays are "
                    "named grandbo-<stage>-replay-*, and only those can be started, described "
                    "or cancelled.",
                )
            ],
        )
        log_retention = self.node.try_find_child("LogRetentionaae0aa3c5b4d4f87b02d85b201efdd8a")
        if log_retention is not None:  # CDK's function that sets the exported logs' retention
            self._keep_helper_logs_for(log_retention.node.find_child("Resource"))
            NagSuppressions.add_resource_suppressions(
                log_retention, [managed_role, scoped_wildcards], apply_to_children=True
            )
            skip_checks(
                log_retention.node.find_child("Resource"),
                NOT_IN_VPC,
                UNCAPPED,
                ("CKV_AWS_116", "invoked synchronously by CloudFormation, which fails the deploy"),
            )
            skip_checks(
                log_retention.node.find_child("ServiceRole").node.find_child("DefaultPolicy"),
                (
                    "CKV_AWS_111",
                    "CDK's grant to set the retention of log groups it does not know the "
                    "names of at synth (the database's exported logs)",
                ),
            )
        NagSuppressions.add_resource_suppressions(
            self.network.endpoint_security_group,
            [
                NagPackSuppression(
                    id="AwsSolutions-EC23",
                    reason="Ingress is HTTPS from the VPC's own CIDR only (a token cdk-nag cannot "
                    "resolve at synth), for the interface endpoints.",
                )
            ],
            apply_to_children=True,
        )
        NagSuppressions.add_resource_suppressions(
            self.functions.keyring,
            [
                NagPackSuppression(
                    id="AwsSolutions-SMG4",
                    reason="Signing keys rotate by adding a key, moving callers, removing the "
                    "old one (several are active at once); automatic rotation would cut callers "
                    "off.",
                )
            ],
        )
        NagSuppressions.add_resource_suppressions(
            self.database.app_secret,
            [
                NagPackSuppression(
                    id="AwsSolutions-SMG4",
                    reason="The application role's password is set by the migrations custom "
                    "resource on deploy; rotating it requires a redeploy (tracked for a rotation "
                    "Lambda that also runs ALTER ROLE).",
                )
            ],
        )
        for queue in (self.embed.dead_letters, self.events.incident_dead_letters):
            NagSuppressions.add_resource_suppressions(
                queue,
                [
                    NagPackSuppression(
                        id="AwsSolutions-SQS3", reason="This queue is itself a dead-letter queue."
                    )
                ],
            )
        NagSuppressions.add_resource_suppressions(
            self.api.api,
            [
                NagPackSuppression(
                    id="AwsSolutions-APIG4",
                    reason="/v1/admin/* is authenticated by an HMAC signature over the body, "
                    "verified in the admin Lambda before routing (a REQUEST authorizer cannot "
                    "see the body). /v1/memory/* uses the tenant Lambda authorizer.",
                ),
                NagPackSuppression(
                    id="AwsSolutions-COG4",
                    reason="Callers are services (Beacon, admins' tools) with tenant-bound "
                    "keys, not Cognito users; the Lambda authorizer and signatures cover it.",
                ),
            ],
            apply_to_children=True,
        )
        if not self.stage.deletion_protection:
            NagSuppressions.add_resource_suppressions(
                self.database.cluster,
                [
                    NagPackSuppression(
                        id="AwsSolutions-RDS10",
                        reason="Deletion protection is on in prod only; dev stacks are disposable.",
                    )
                ],
                apply_to_children=True,
            )
