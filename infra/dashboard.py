"""One CloudWatch dashboard per stage (cdk-monitoring-constructs): the API's rate and
latency, every function's errors, throttles and duration, the embed queue and the dead
letters, Aurora's capacity, CPU and connections, the proxy's connections and pinning,
and Grandbo's own signals (vector-leg unavailability, entries created by origin, entries
waiting for a vector). Paging stays in infra/alarms.py; the dashboard only shows.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_rds as rds
from aws_cdk import aws_sqs as sqs
from cdk_monitoring_constructs import (
    CustomMetricGroup,
    DefaultDashboardFactory,
    LatencyType,
    MonitoringFacade,
)
from constructs import Construct

from grandbo.observability import NAMESPACE, metric_dimensions
from infra.alarms import PROXY_TARGET_GROUP, proxy_availability
from infra.config import StageConfig

ORIGINS = ("incident", "admin", "correction")


def dashboard_name(stage: StageConfig) -> str:
    return f"grandbo-{stage.name}"


class OperationsDashboard(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        stage: StageConfig,
        api: apigw.RestApi,
        functions: dict[str, lambda_.Function],
        embed_queue: sqs.IQueue,
        embed_dead_letters: sqs.IQueue,
        incident_queue: sqs.IQueue,
        incident_dead_letters: sqs.IQueue,
        cluster: rds.DatabaseCluster,
        proxy: rds.DatabaseProxy,
    ) -> None:
        super().__init__(scope, construct_id)
        self.facade = MonitoringFacade(
            self,
            "Monitoring",
            dashboard_factory=DefaultDashboardFactory(
                self,
                "Dashboards",
                dashboard_name_prefix=dashboard_name(stage),
                create_dashboard=True,
                create_summary_dashboard=False,
                create_alarm_dashboard=False,
            ),
        )
        own = metric_dimensions(stage.name)

        def grandbo(
            name: str, label: str, statistic: str = "Sum", **extra: str
        ) -> cloudwatch.Metric:
            return cloudwatch.Metric(
                namespace=NAMESPACE,
                metric_name=name,
                dimensions_map={**own, **extra},
                statistic=statistic,
                period=Duration.minutes(5),
                label=label,
            )

        def proxy_metric(name: str, label: str) -> cloudwatch.Metric:
            return cloudwatch.Metric(
                namespace="AWS/RDS",
                metric_name=name,
                dimensions_map={"ProxyName": proxy.db_proxy_name},
                statistic="Maximum",
                period=Duration.minutes(5),
                label=label,
            )

        self.facade.monitor_api_gateway(
            api=api,
            api_stage=stage.name,
            human_readable_name=f"Memory API ({stage.name})",
            latency_types_to_render=[LatencyType.P50, LatencyType.P95],
        )
        self.facade.monitor_custom(
            human_readable_name="Memory",
            alarm_friendly_name="Memory",
            metric_groups=[
                CustomMetricGroup(
                    title="Queries whose vector leg was unavailable",
                    metrics=[grandbo("VectorLegUnavailable", "vector leg unavailable")],
                ),
                CustomMetricGroup(
                    title="Entries created, by origin",
                    metrics=[
                        cloudwatch.Metric(
                            namespace=NAMESPACE,
                            metric_name="EntriesCreated",
                            dimensions_map={**own, "origin": origin},
                            statistic="Sum",
                            period=Duration.minutes(5),
                            label=origin,
                        )
                        for origin in ORIGINS
                    ],
                ),
                CustomMetricGroup(
                    title="Embedding backlog",
                    metrics=[
                        grandbo(
                            "OldestUnembeddedAgeSeconds",
                            "oldest entry without a vector (s)",
                            "Maximum",
                        ),
                        grandbo("BackfillEnqueued", "jobs the sweeper enqueued"),
                        grandbo("EmbedFailures", "embed records failed"),
                        grandbo("EmbedDeferred", "embed records deferred"),
                    ],
                ),
            ],
        )
        self.facade.monitor_sqs_queue_with_dlq(
            queue=embed_queue,
            dead_letter_queue=embed_dead_letters,
            human_readable_name="Embed queue",
            alarm_friendly_name="EmbedQueue",
        )
        self.facade.monitor_sqs_queue_with_dlq(
            queue=incident_queue,
            dead_letter_queue=incident_dead_letters,
            human_readable_name="Incident queue",
            alarm_friendly_name="IncidentQueue",
        )
        for name, function in sorted(functions.items()):
            self.facade.monitor_lambda_function(
                lambda_function=function,
                human_readable_name=f"{name} function",
                alarm_friendly_name=f"{name.title()}Function",
            )
        self.facade.monitor_aurora_cluster(
            cluster=cluster, human_readable_name="Aurora", alarm_friendly_name="Aurora"
        )
        self.facade.monitor_custom(
            human_readable_name="RDS Proxy",
            alarm_friendly_name="Proxy",
            metric_groups=[
                CustomMetricGroup(
                    title="Proxy connections",
                    metrics=[
                        proxy_metric("ClientConnections", "client connections"),
                        proxy_metric("DatabaseConnections", "database connections"),
                        # a connection pinned to its client for the session: Grandbo's
                        # request paths keep no session state, so this stays near 0
                        proxy_metric("DatabaseConnectionsCurrentlySessionPinned", "session-pinned"),
                    ],
                ),
                CustomMetricGroup(
                    title=f"Writer availability through the proxy ({PROXY_TARGET_GROUP})",
                    metrics=[proxy_availability(proxy)],
                ),
            ],
        )
