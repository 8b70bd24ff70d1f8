"""The one Logger, Metrics and Tracer of every Grandbo function (powertools singletons)."""

from __future__ import annotations

from aws_lambda_powertools import Logger, Metrics, Tracer

SERVICE = "grandbo"

logger = Logger(service=SERVICE)
metrics = Metrics(namespace="Grandbo", service=SERVICE)
# Patch only botocore (Bedrock, SQS, Secrets Manager calls): auto-patching every library
# X-Ray knows imports them all at cold start.
tracer = Tracer(service=SERVICE, patch_modules=["botocore"])


def count_entries_created(origin: str, count: int) -> None:
    """`EntriesCreated` with an `origin` dimension (incident / admin / correction)."""
    if count <= 0:
        return
    from aws_lambda_powertools.metrics import MetricUnit, single_metric

    with single_metric(
        name="EntriesCreated", unit=MetricUnit.Count, value=count, namespace="Grandbo"
    ) as metric:
        metric.add_dimension(name="origin", value=origin)
