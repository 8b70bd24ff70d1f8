"""Alarms that page: dead letters, a stuck embed queue, every function's errors and
throttles, API 5xx, entries waiting for a vector (and a sweeper that stopped saying so),
Aurora at its capacity ceiling, hot or out of connections, and an unavailable proxy.

Each threshold is a named constant here, documented in docs/OPERATIONS.md. Every
alarm's metric and dimension set is one AWS publishes (tests/infra/test_alarms.py holds
AWS's metric tables); Grandbo's own metrics carry the stage (grandbo.observability), so
each stage's alarms watch its own data. The dashboard is infra/dashboard.py.
"""

from __future__ import annotations

from aws_cdk import Duration, Stack
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_rds as rds
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from grandbo.observability import NAMESPACE, metric_dimensions
from infra.config import StageConfig

# The sweeper publishes this (seconds since the oldest active entry without a current
# vector was written); past 30 minutes, embedding is stuck, not slow.
OLDEST_UNEMBEDDED_THRESHOLD_S = 1800
# An embed job older than this is not being worked (the worker is down or throttled).
EMBED_QUEUE_OLDEST_S = 900
# Aurora: at its ACU ceiling for 15 minutes, CPU above this for 15 minutes, connections
# above this share of what the proxy may open.
AURORA_CPU_PERCENT = 80
AURORA_CONNECTIONS = 400
# RDS Proxy: its writer's availability averaged over the proxy's nodes under this for
# this many 5-minute periods running (15 minutes: one node's missed check is not an outage)
# an incident-closed event not recorded within this is waiting on the database or the
# function (its retries back off: grandbo.runtime.incident_queue)
INCIDENT_QUEUE_OLDEST_S = 15 * 60
# 5-minute periods with any query searched on the writer instead of a reader, running
READER_FALLBACK_PERIODS = 3
# 5-minute periods in which the proxy never had zero pinned connections: longer than the
# index job's longest run (900 s), whose schema-owner connection sends set_config
PINNED_PERIODS = 4
PROXY_AVAILABILITY_PERCENT = 95
PROXY_UNAVAILABLE_PERIODS = 3


class Alarms(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        dead_letter_queues: dict[str, sqs.IQueue],
        embed_queue: sqs.IQueue,
        incident_queue: sqs.IQueue,
        functions: dict[str, lambda_.Function],
        api: apigw.RestApi,
        cluster: rds.DatabaseCluster,
        proxy: rds.DatabaseProxy,
        stage: StageConfig,
        alarm_email: str | None,
        alarm_topic_arn: str | None = None,
        reads_scale_out: bool = False,
    ) -> None:
        super().__init__(scope, construct_id)
        max_acu = stage.max_acu
        own = metric_dimensions(stage.name)
        if stage.alarm_subscriber_required and not (alarm_email or alarm_topic_arn):
            # an alarm topic nobody subscribes to pages nobody
            raise ValueError(
                f"stage {stage.name} needs someone its alarms reach: deploy with "
                "-c alarm_email=<address> or -c alarm_topic_arn=<an existing topic, such as "
                "a chat integration's>"
            )
        stack = Stack.of(self)
        # the alarms' names, set below from this prefix: what the topic's and the key's
        # conditions name (CloudWatch publishes as the alarm: aws:SourceArn)
        self.alarm_name_prefix = f"{stack.stack_name}-"
        alarm_arns = (
            f"arn:{stack.partition}:cloudwatch:{stack.region}:{stack.account}:alarm:"
            f"{self.alarm_name_prefix}*"
        )
        # Encrypted with a key of our own: with the AWS-managed alias/aws/sns key, whose
        # policy no one can change, CloudWatch gets AccessDenied from KMS and no alarm
        # is ever delivered. AWS's SNS guide, "Enable compatibility between event
        # sources from AWS services and encrypted topics":
        # https://docs.aws.amazon.com/sns/latest/dg/sns-key-management.html#compatibility-with-aws-services
        self.key = kms.Key(
            self,
            "AlarmKey",
            description="Grandbo alarm topic: CloudWatch alarms publish with it",
            enable_key_rotation=True,
        )
        service = iam.ServicePrincipal("cloudwatch.amazonaws.com")
        conditions = {
            "StringEquals": {"aws:SourceAccount": stack.account},
            "ArnLike": {"aws:SourceArn": alarm_arns},
        }
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchAlarmsPublish",
                principals=[service],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],
                conditions=conditions,
            )
        )
        self.topic = sns.Topic(
            self,
            "AlarmTopic",
            display_name="Grandbo alarms",
            enforce_ssl=True,
            master_key=self.key,
        )
        # the TLS-only policy replaces SNS's default one: CloudWatch must be allowed
        self.topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchAlarmsPublish",
                principals=[service],
                actions=["sns:Publish"],
                resources=[self.topic.topic_arn],
                conditions=conditions,
            )
        )
        if alarm_email:
            self.topic.add_subscription(subscriptions.EmailSubscription(alarm_email))
        self.topics = [self.topic]
        if alarm_topic_arn:  # the operator's own topic (its key and policy are theirs)
            self.topics.append(sns.Topic.from_topic_arn(self, "OperatorTopic", alarm_topic_arn))
        embed_function = functions["embed"]
        alarms = []
        for name, queue in dead_letter_queues.items():
            alarms.append(
                queue.metric_approximate_number_of_messages_visible(
                    period=Duration.minutes(1)
                ).create_alarm(
                    self,
                    f"{name}DlqNotEmpty",
                    threshold=0,
                    evaluation_periods=1,
                    comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                    alarm_description=f"{name}: messages in the dead-letter queue",
                )
            )
        alarms.append(
            embed_function.metric_errors(period=Duration.minutes(5)).create_alarm(
                self,
                "EmbedErrors",
                threshold=5,
                evaluation_periods=1,
                alarm_description="embed worker invocations failing",
            )
        )
        alarms.append(
            grandbo_metric(own, "EmbedFailures", "Sum").create_alarm(
                self,
                "EmbedRecordFailures",
                threshold=20,
                evaluation_periods=1,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
                alarm_description="embed records failing (Bedrock throttling or faults)",
            )
        )
        alarms.append(
            api.metric_server_error(period=Duration.minutes(5)).create_alarm(
                self,
                "Api5xx",
                threshold=1,
                evaluation_periods=1,
                alarm_description="the memory API answered 5xx",
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )
        )
        alarms.append(
            grandbo_metric(
                own,
                "OldestUnembeddedAgeSeconds",
                "Maximum",
                # one period per sweeper run: shorter, a period between two runs has no
                # data (breaching), and a fresh deploy, whose first run is up to an
                # interval away, fired it (dev: 15-minute periods, a 30-minute sweeper)
                period=Duration.minutes(stage.sweeper_minutes),
            ).create_alarm(
                self,
                "OldestUnembeddedEntry",
                threshold=OLDEST_UNEMBEDDED_THRESHOLD_S,
                evaluation_periods=2,
                # the sweeper publishes this on every run: no data means no sweeper
                treat_missing_data=cloudwatch.TreatMissingData.BREACHING,
                alarm_description="an active entry has waited over 30 minutes for a vector, "
                "or the sweeper stopped reporting",
            )
        )
        if reads_scale_out:
            # the query function counts each query it searched on the writer for want of
            # a reader (grandbo.runtime.lambda_container): a reader restarting is a few
            # minutes of it; three 5-minute periods running is a reader that is not there
            alarms.append(
                grandbo_metric(own, "ReaderFallbacks", "Sum").create_alarm(
                    self,
                    "ReadsOnTheWriter",
                    threshold=0,
                    evaluation_periods=READER_FALLBACK_PERIODS,
                    datapoints_to_alarm=READER_FALLBACK_PERIODS,
                    comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                    treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
                    alarm_description="queries searched on the writer for want of a reader "
                    "(ReaderFallbacks) for 15 minutes: the proxy's read-only endpoint, its TLS, "
                    "or the readers themselves",
                )
            )
        for queue, alarm_id, oldest_s, description in (
            (
                embed_queue,
                "EmbedQueueStuck",
                EMBED_QUEUE_OLDEST_S,
                "the oldest embed job has waited over 15 minutes",
            ),
            (
                incident_queue,
                "IncidentsWaiting",
                INCIDENT_QUEUE_OLDEST_S,
                "an incident-closed event has waited over 15 minutes to be recorded: the "
                "database (a failover, a patch window) or the incident function; it is "
                "retried for about two hours before it is dead-lettered",
            ),
        ):
            alarms.append(
                queue.metric_approximate_age_of_oldest_message(
                    period=Duration.minutes(5), statistic="Maximum"
                ).create_alarm(
                    self,
                    alarm_id,
                    threshold=oldest_s,
                    evaluation_periods=1,
                    comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                    alarm_description=description,
                )
            )
        for name, function in sorted(functions.items()):
            watched = [(function.metric_throttles, "Throttles", "was throttled")]
            if name != "embed":  # its errors alarm above, with a tolerance for retries
                watched.append((function.metric_errors, "Errors", "raised"))
            for metric, suffix, what in watched:
                alarms.append(
                    metric(period=Duration.minutes(5)).create_alarm(
                        self,
                        f"{name.title()}{suffix}",
                        threshold=0,
                        evaluation_periods=1,
                        comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                        treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
                        alarm_description=f"the {name} function {what}",
                    )
                )
        alarms.append(
            cluster.metric(
                "ServerlessDatabaseCapacity", period=Duration.minutes(5), statistic="Maximum"
            ).create_alarm(
                self,
                "AuroraAtMaxCapacity",
                threshold=max_acu,
                evaluation_periods=3,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                alarm_description=f"Aurora at its {max_acu} ACU ceiling for 15 minutes",
            )
        )
        alarms.append(
            cluster.metric_cpu_utilization(period=Duration.minutes(5)).create_alarm(
                self,
                "AuroraCpu",
                threshold=AURORA_CPU_PERCENT,
                evaluation_periods=3,
                alarm_description=f"Aurora CPU above {AURORA_CPU_PERCENT} % for 15 minutes",
            )
        )
        alarms.append(
            cluster.metric_database_connections(
                period=Duration.minutes(5), statistic="Maximum"
            ).create_alarm(
                self,
                "AuroraConnections",
                threshold=AURORA_CONNECTIONS,
                evaluation_periods=2,
                alarm_description=f"over {AURORA_CONNECTIONS} connections to Aurora",
            )
        )
        alarms.append(
            proxy_availability(proxy).create_alarm(
                self,
                "ProxyUnavailable",
                threshold=PROXY_AVAILABILITY_PERCENT,
                evaluation_periods=PROXY_UNAVAILABLE_PERIODS,
                comparison_operator=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
                # AWS: "Some of these metrics might not be visible until after the first
                # successful connection by a proxy"; the deploy's migration makes that
                # connection and the sweeper one every run, so no data is a proxy that
                # does not work
                treat_missing_data=cloudwatch.TreatMissingData.BREACHING,
                alarm_description="RDS Proxy cannot reach its writer",
            )
        )
        alarms.append(
            cloudwatch.Metric(
                namespace="AWS/RDS",
                metric_name="DatabaseConnectionsCurrentlySessionPinned",
                # published by ProxyName alone, among other sets (the monitoring page)
                dimensions_map={"ProxyName": proxy.db_proxy_name},
                period=Duration.minutes(5),
                # never back to zero in a period: a pin that stays, not a deploy's
                # migration or the hourly index job (schema-owner connections that send
                # set_config, at most 15 minutes)
                statistic="Minimum",
            ).create_alarm(
                self,
                "ProxyConnectionsPinned",
                threshold=0,
                evaluation_periods=PINNED_PERIODS,
                datapoints_to_alarm=PINNED_PERIODS,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
                alarm_description="RDS Proxy has kept a pinned database connection for 20 "
                "minutes: a statement the proxy pins on reached a request path "
                "(tests/e2e/test_proxy_pinning.py lists what pins)",
            )
        )
        for alarm in alarms:
            cfn = alarm.node.default_child
            assert isinstance(cfn, cloudwatch.CfnAlarm)
            cfn.alarm_name = f"{self.alarm_name_prefix}{alarm.node.id}"
            for topic in self.topics:
                alarm.add_alarm_action(actions.SnsAction(topic))
        self.alarms = alarms


# RDS Proxy's target group (CDK's DatabaseProxy registers the cluster in the one named so)
PROXY_TARGET_GROUP = "default"


def grandbo_metric(
    own: dict[str, str], name: str, statistic: str, *, period: Duration | None = None
) -> cloudwatch.Metric:
    """A metric Grandbo's code publishes, with the stage's dimensions (`own`), per 5 minutes
    unless `period` says otherwise."""
    return cloudwatch.Metric(
        namespace=NAMESPACE,
        metric_name=name,
        period=period or Duration.minutes(5),
        statistic=statistic,
        dimensions_map=own,
    )


def proxy_availability(proxy: rds.DatabaseProxy) -> cloudwatch.Metric:
    """The writer's availability through the proxy. AWS publishes AvailabilityPercentage
    with the dimension set ProxyName, TargetGroup, TargetRole only, so a metric named by
    ProxyName alone has no data at all:
    https://docs.aws.amazon.com/AmazonRDS/latest/AuroraUserGuide/rds-proxy.monitoring.html
    """
    return cloudwatch.Metric(
        namespace="AWS/RDS",
        metric_name="AvailabilityPercentage",
        dimensions_map={
            "ProxyName": proxy.db_proxy_name,
            "TargetGroup": PROXY_TARGET_GROUP,
            "TargetRole": "READ_WRITE",
        },
        period=Duration.minutes(5),
        # the average over the proxy's nodes: the Minimum paged on one node's missed
        # health check (the alarm wants it under PROXY_AVAILABILITY_PERCENT for
        # PROXY_UNAVAILABLE_PERIODS periods running)
        statistic="Average",
    )
