"""The one Logger, Metrics and Tracer of every Grandbo function (powertools singletons).

X-Ray subsegments from the SDK are switched per function with `GRANDBO_XRAY_SDK`. The
powertools Tracer imports the X-Ray SDK and botocore when it is constructed, even with
tracing disabled: ~190 ms of every cold start (docs/BENCHMARKS.md). The query path (query
API, authorizer) runs without it and keeps Lambda's managed tracing (the function's own
segment, no SDK); the write and embedding functions, where a cold start costs no one a
wait, trace Bedrock, SQS and Secrets Manager calls through the SDK.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from aws_lambda_powertools import Logger, Metrics, Tracer

SERVICE = "grandbo"
NAMESPACE = "Grandbo"
XRAY_SDK_ENV = "GRANDBO_XRAY_SDK"
STAGE_ENV = "GRANDBO_STAGE"
# where the local runner's log lines and metrics go (`to_local_file`)
LOCAL_OUTPUT_ENV = "GRANDBO_LOCAL_OUTPUT"

F = TypeVar("F", bound=Callable[..., Any])

logger = Logger(service=SERVICE)


def metric_dimensions(stage: str) -> dict[str, str]:
    """The dimensions of every Grandbo metric of `stage`: two stages in one account publish
    apart, and each stage's alarms (infra/alarms.py, which states these same dimensions)
    watch its own data only. CloudWatch names a metric by its namespace, name and whole
    dimension set, so an alarm matches only the exact set the code publishes."""
    return {"service": SERVICE, "stage": stage}


metrics = Metrics(namespace=NAMESPACE, service=SERVICE)
metrics.set_default_dimensions(stage=os.environ.get(STAGE_ENV, "local"))


class Untraced:
    """The Tracer's decorators, as no-ops: for functions that run without the X-Ray SDK."""

    def capture_method(self, method: F) -> F:
        return method

    def capture_lambda_handler(self, handler: F) -> F:
        return handler


def xray_sdk_enabled() -> bool:
    return os.environ.get(XRAY_SDK_ENV, "false").strip().lower() in ("1", "true", "yes")


def build_tracer() -> Tracer | Untraced:
    if not xray_sdk_enabled():
        return Untraced()
    # Patch only botocore (Bedrock, SQS, Secrets Manager calls): auto-patching every
    # library X-Ray knows imports them all at cold start.
    return Tracer(service=SERVICE, patch_modules=["botocore"])


tracer = build_tracer()


def bind_request_keys(**keys: str) -> None:
    """Who this invocation serves (tenant, key, incident), on its log lines only.

    Thread-local and replaced on every invocation: a warm container, or the local runner
    serving several requests at once, never logs one caller's identity on another's line.
    """
    logger.thread_safe_clear_keys()
    if keys:
        logger.thread_safe_append_keys(**keys)


def count_entries_created(origin: str, count: int) -> None:
    """`EntriesCreated` with an `origin` dimension (incident / admin / correction): in
    Lambda an EMF line on stdout; locally in the runner's file (`to_local_file`), or
    nothing where metrics are disabled (powertools' `single_metric` prints even then)."""
    if count <= 0:
        return
    from aws_lambda_powertools.metrics import MetricUnit
    from aws_lambda_powertools.metrics.provider.cloudwatch_emf.cloudwatch import (
        AmazonCloudWatchEMFProvider,
    )

    metric = AmazonCloudWatchEMFProvider(namespace=NAMESPACE)
    metric.add_metric(name="EntriesCreated", unit=MetricUnit.Count, value=count)
    for name, value in metric_dimensions(os.environ.get(STAGE_ENV, "local")).items():
        metric.add_dimension(name=name, value=value)
    metric.add_dimension(name="origin", value=origin)
    line = json.dumps(metric.serialize_metric_set(), separators=(",", ":"))
    local = os.environ.get(LOCAL_OUTPUT_ENV)
    if local:
        with open(local, "a", encoding="utf-8") as sink:
            sink.write(line + "\n")
    elif os.environ.get("POWERTOOLS_METRICS_DISABLED", "").lower() != "true":
        print(line, flush=True)


def to_local_file(path: Path) -> None:
    """The local runner's structured log lines and metrics appended to `path` instead of
    its terminal (which shows what a person needs; `--verbose` keeps them there)."""
    os.environ[LOCAL_OUTPUT_ENV] = str(path)
    handler = logger.registered_handler
    if isinstance(handler, logging.StreamHandler):
        handler.setStream(path.open("a", encoding="utf-8"))
