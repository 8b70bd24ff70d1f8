"""Alarms that page: dead letters, embed errors, API 5xx, entries waiting for a vector."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

# The sweeper publishes this (seconds since the oldest active entry without a current
# vector was written); past 30 minutes, embedding is stuck, not slow.
OLDEST_UNEMBEDDED_THRESHOLD_S = 1800


class Alarms(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        dead_letter_queues: dict[str, sqs.IQueue],
        embed_function: lambda_.Function,
        api: apigw.RestApi,
    ) -> None:
        super().__init__(scope, construct_id)
        self.topic = sns.Topic(self, "AlarmTopic", display_name="Grandbo alarms", enforce_ssl=True)
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
            cloudwatch.Metric(
                namespace="Grandbo",
                metric_name="EmbedFailures",
                period=Duration.minutes(5),
                statistic="Sum",
                dimensions_map={"service": "grandbo"},
            ).create_alarm(
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
            cloudwatch.Metric(
                namespace="Grandbo",
                metric_name="OldestUnembeddedAgeSeconds",
                period=Duration.minutes(15),
                statistic="Maximum",
                dimensions_map={"service": "grandbo"},
            ).create_alarm(
                self,
                "OldestUnembeddedEntry",
                threshold=OLDEST_UNEMBEDDED_THRESHOLD_S,
                evaluation_periods=2,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
                alarm_description="an active entry has waited over 30 minutes for a vector",
            )
        )
        for alarm in alarms:
            alarm.add_alarm_action(actions.SnsAction(self.topic))
        self.alarms = alarms
