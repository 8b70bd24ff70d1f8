"""What an operator relies on in AWS (issue 23, items 9-11, 13-15), read from the
synthesized templates: alarms on metrics AWS publishes, stages apart in one account, a
runbook policy on the resources AWS's authorization reference names, a dashboard, and a
retention on every log group the stack owns."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

# The dimension sets AWS publishes each alarmed metric with, from its metric tables:
# SQS https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-available-cloudwatch-metrics.html
# Lambda https://docs.aws.amazon.com/lambda/latest/dg/monitoring-metrics-types.html
# API Gateway https://docs.aws.amazon.com/apigateway/latest/developerguide/api-gateway-metrics-and-dimensions.html
# Aurora https://docs.aws.amazon.com/AmazonRDS/latest/AuroraUserGuide/dimensions.html
# RDS Proxy https://docs.aws.amazon.com/AmazonRDS/latest/AuroraUserGuide/rds-proxy.monitoring.html
#   (AvailabilityPercentage: ProxyName, TargetGroup, TargetRole only; the pinning metric:
#   ProxyName among others)
AWS_METRICS: dict[tuple[str, str], list[set[str]]] = {
    ("AWS/SQS", "ApproximateNumberOfMessagesVisible"): [{"QueueName"}],
    ("AWS/SQS", "ApproximateAgeOfOldestMessage"): [{"QueueName"}],
    ("AWS/Lambda", "Errors"): [{"FunctionName"}, {"FunctionName", "Resource"}],
    ("AWS/Lambda", "Throttles"): [{"FunctionName"}, {"FunctionName", "Resource"}],
    ("AWS/ApiGateway", "5XXError"): [
        {"ApiName"},
        {"ApiName", "Stage"},
        {"ApiName", "Method", "Resource", "Stage"},
    ],
    ("AWS/RDS", "ServerlessDatabaseCapacity"): [{"DBClusterIdentifier"}, {"DBInstanceIdentifier"}],
    ("AWS/RDS", "CPUUtilization"): [{"DBClusterIdentifier"}, {"DBInstanceIdentifier"}],
    ("AWS/RDS", "DatabaseConnections"): [{"DBClusterIdentifier"}, {"DBInstanceIdentifier"}],
    ("AWS/RDS", "AvailabilityPercentage"): [{"ProxyName", "TargetGroup", "TargetRole"}],
    ("AWS/RDS", "DatabaseConnectionsCurrentlySessionPinned"): [
        {"ProxyName"},
        {"ProxyName", "TargetGroup", "Target"},
        {"ProxyName", "TargetGroup", "TargetRole"},
    ],
}
PROXY_TARGET_ROLES = {"READ_WRITE", "READ_ONLY"}


def _alarms(t: Any) -> list[dict[str, Any]]:
    return [a["Properties"] for a in t.find_resources("AWS::CloudWatch::Alarm").values()]


def _published_by_the_code(stage: str) -> dict[str, dict[str, str]]:
    """What Grandbo's code publishes, metric by metric: its EMF lines, captured from a
    fresh interpreter with the stage's environment (the tests disable metrics)."""
    probe = (
        "from aws_lambda_powertools.metrics import MetricUnit\n"
        "from grandbo.observability import metrics\n"
        "for name in ('EmbedFailures', 'OldestUnembeddedAgeSeconds', 'VectorLegUnavailable',\n"
        "             'ReaderFallbacks'):\n"
        "    metrics.add_metric(name, MetricUnit.Count, 1)\n"
        "metrics.flush_metrics()\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("POWERTOOLS_METRICS")}
    env.update(GRANDBO_STAGE=stage, PYTHONPATH=str(ROOT / "shared"))
    done = subprocess.run(  # noqa: S603 - our own interpreter
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True
    )
    published: dict[str, dict[str, str]] = {}
    for line in done.stdout.splitlines():
        document = json.loads(line)
        (directive,) = document["_aws"]["CloudWatchMetrics"]
        (dimensions,) = directive["Dimensions"]
        for metric in directive["Metrics"]:
            published[metric["Name"]] = {name: document[name] for name in dimensions}
    return published


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_every_alarm_watches_a_metric_with_a_dimension_set_that_is_published(
    stage: str, dev: Any, prod: Any
) -> None:
    """Issue 23, item 10 (and 9): an alarm on a dimension set nobody publishes has no
    data for ever. AWS's metrics are held against AWS's tables; Grandbo's own against
    what its code emits in that stage, so each stage's alarms see that stage only."""
    _, t = {"dev": dev, "prod": prod}[stage]
    published = _published_by_the_code(stage)
    for alarm in _alarms(t):
        namespace, name = alarm["Namespace"], alarm["MetricName"]
        dimensions = {d["Name"]: d["Value"] for d in alarm.get("Dimensions", [])}
        if namespace == "Grandbo":
            assert dimensions == published[name], name
            assert dimensions["stage"] == stage
            continue
        allowed = AWS_METRICS[(namespace, name)]
        assert set(dimensions) in allowed, (namespace, name, sorted(dimensions))
        if "TargetRole" in dimensions:
            assert dimensions["TargetRole"] in PROXY_TARGET_ROLES
            assert dimensions["TargetGroup"] == "default"


def test_stages_in_one_account_read_only_their_own_incidents(dev: Any, prod: Any) -> None:
    """Issue 23, item 9: each stage's rule and archive are on its own bus; nothing of
    Grandbo listens on the default bus, where one rule would match every stage's events."""
    names = {}
    for stage, (_, t) in (("dev", dev), ("prod", prod)):
        buses = t.find_resources("AWS::Events::EventBus")
        ((bus_id, bus),) = buses.items()
        names[stage] = bus["Properties"]["Name"]
        incident_rules = [
            r["Properties"]
            for r in t.find_resources("AWS::Events::Rule").values()
            if "EventPattern" in r["Properties"]
        ]
        assert incident_rules
        for rule in incident_rules:
            assert rule["EventBusName"] == {"Ref": bus_id}
        (archive,) = t.find_resources("AWS::Events::Archive").values()
        assert archive["Properties"]["SourceArn"] == {"Fn::GetAtt": [bus_id, "Arn"]}
        outputs = t.to_json()["Outputs"]
        assert outputs["IncidentBusName"]["Value"] == {"Ref": bus_id}
    assert names == {"dev": "grandbo-dev-incidents", "prod": "grandbo-prod-incidents"}


def _statements(t: Any) -> list[dict[str, Any]]:
    (policy,) = t.find_resources("AWS::IAM::ManagedPolicy").values()
    return list(policy["Properties"]["PolicyDocument"]["Statement"])


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def test_each_runbook_action_is_granted_on_the_resource_type_aws_checks(
    dev: Any, prod: Any
) -> None:
    """Issue 23, item 11: the Service Authorization Reference for EventBridge
    (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazoneventbridge.html)
    checks StartReplay against the archive, DescribeReplay and CancelReplay against the
    replay; a grant on replay ARNs alone lets no operator start one."""
    for stage, (_, t) in (("dev", dev), ("prod", prod)):
        (archive_id,) = t.find_resources("AWS::Events::Archive").keys()
        archive = {"Fn::GetAtt": [archive_id, "Arn"]}
        by_action: dict[str, list[Any]] = {}
        for statement in _statements(t):
            for action in _as_list(statement["Action"]):
                by_action.setdefault(action, []).extend(_as_list(statement["Resource"]))
        assert archive in by_action["events:StartReplay"]
        for action in ("events:StartReplay", "events:DescribeReplay", "events:CancelReplay"):
            replays = [r for r in by_action[action] if r != archive]
            assert replays, action
            for resource in replays:
                text = json.dumps(resource)
                assert f":replay/grandbo-{stage}-replay-*" in text, (action, text)
        assert by_action["events:DescribeArchive"] == [archive]
        assert all(r != "*" for resources in by_action.values() for r in resources)


def test_a_dashboard_per_stage_shows_what_the_runbook_reads(dev: Any, prod: Any) -> None:
    """Issue 23, items 13 and 15: one dashboard per stage (cdk-monitoring-constructs),
    with the query API's rate and latency, Grandbo's own signals, the embed queue and its
    dead letters, every function, Aurora, and the proxy's connections and pinning."""
    for stage, (stack, t) in (("dev", dev), ("prod", prod)):
        (dashboard,) = t.find_resources("AWS::CloudWatch::Dashboard").values()
        body = json.dumps(dashboard["Properties"]["DashboardBody"])
        assert f"grandbo-{stage}" in json.dumps(dashboard["Properties"]["DashboardName"])
        for shown in (
            "VectorLegUnavailable",
            "EntriesCreated",
            "OldestUnembeddedAgeSeconds",
            "EmbedFailures",
            "DatabaseConnectionsCurrentlySessionPinned",
            "ClientConnections",
            "AvailabilityPercentage",
            "ServerlessDatabaseCapacity",
            "ApproximateNumberOfMessagesVisible",
            "Latency",
            "Throttles",
        ):
            assert shown in body, (stage, shown)
        for origin in ("incident", "admin", "correction"):
            # each origin's series, with the stage's dimensions as the code publishes them
            series = (
                f'\\"EntriesCreated\\",\\"origin\\",\\"{origin}\\",'
                f'\\"service\\",\\"grandbo\\",\\"stage\\",\\"{stage}\\"'
            )
            assert series in body, (stage, origin)
        # every Grandbo function has its widgets
        for function in stack.functions.functions.values():
            logical = stack.get_logical_id(function.node.default_child)
            assert logical in body, logical


def test_every_log_group_the_stack_makes_has_a_retention(dev: Any, prod: Any) -> None:
    """Issue 23, item 15: CDK's own helper (the log-retention function) logs to a group
    with the stage's retention instead of one Lambda would keep for ever."""
    for _, t in (dev, prod):
        for group in t.find_resources("AWS::Logs::LogGroup").values():
            assert "RetentionInDays" in group["Properties"], group
        functions = t.find_resources("AWS::Lambda::Function")
        for logical_id, function in functions.items():
            assert "LoggingConfig" in function["Properties"], logical_id


def test_a_saturated_proxy_answers_before_the_query_function_times_out(dev: Any) -> None:
    """Issue 23, item 14: RDS Proxy holds a client waiting for a pooled connection up to
    its ConnectionBorrowTimeout (120 s by default), past the query function's 10 s; both
    it and the driver's connect timeout stay well inside, so the caller gets a 503."""
    from grandbo.storage.connections import CONNECT_TIMEOUT_S

    _, t = dev
    (group,) = t.find_resources("AWS::RDS::DBProxyTargetGroup").values()
    pool = group["Properties"]["ConnectionPoolConfigurationInfo"]
    query_timeout = next(
        f["Properties"]["Timeout"]
        for f in t.find_resources("AWS::Lambda::Function").values()
        if f["Properties"].get("Description", "").startswith("grandbo query")
    )
    assert pool["ConnectionBorrowTimeout"] == CONNECT_TIMEOUT_S
    assert pool["ConnectionBorrowTimeout"] + CONNECT_TIMEOUT_S <= query_timeout


def test_every_function_the_runbook_invokes_the_operator_policy_may_invoke(dev: Any) -> None:
    """docs/OPERATIONS.md invokes functions by their stack outputs; each is allowed."""
    import re

    stack, t = dev
    runbook = (ROOT / "docs" / "OPERATIONS.md").read_text()
    invoked = set(re.findall(r"`?(\w+)FunctionName`?", runbook))
    assert {"Backfill", "Index"} <= invoked
    granted = [
        resource
        for statement in _statements(t)
        if "lambda:InvokeFunction" in _as_list(statement["Action"])
        for resource in _as_list(statement["Resource"])
    ]
    for name in invoked:
        function = stack.functions.functions[name.lower()]
        logical = stack.get_logical_id(function.node.default_child)
        assert {"Fn::GetAtt": [logical, "Arn"]} in granted, name


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_a_pin_that_stays_pages_and_a_deploys_does_not(stage: str, dev: Any, prod: Any) -> None:
    """Issue 35, point 4: DatabaseConnectionsCurrentlySessionPinned staying above zero
    (https://docs.aws.amazon.com/AmazonRDS/latest/AuroraUserGuide/rds-proxy.monitoring.html);
    the schema owner's set_config pins for a migration or an index build, at most the
    index job's 900 s, shorter than the alarm's window."""
    from infra.alarms import PINNED_PERIODS
    from infra.functions import SPECS

    _, t = dev if stage == "dev" else prod
    (alarm,) = [
        a for a in _alarms(t) if a.get("MetricName") == "DatabaseConnectionsCurrentlySessionPinned"
    ]
    assert [d["Name"] for d in alarm["Dimensions"]] == ["ProxyName"]
    assert alarm["Statistic"] == "Minimum"
    assert alarm["Threshold"] == 0
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
    assert alarm["EvaluationPeriods"] == alarm["DatapointsToAlarm"] == PINNED_PERIODS
    assert alarm["Period"] * PINNED_PERIODS > SPECS["index"].timeout_s


def test_the_runbook_invokes_the_reserved_functions_asynchronously(prod: Any) -> None:
    """Issue 35, point 6: prod reserves one concurrent backfill and one index job, and
    Lambda throttles a synchronous invoke beyond a function's reserved concurrency while
    it queues and retries an asynchronous one
    (https://docs.aws.amazon.com/lambda/latest/dg/invocation-async.html); every
    `aws lambda invoke` of the runbook is asynchronous, and the log group it reads the
    outcome from is an output."""
    import re

    stack, t = prod
    runbook = (ROOT / "docs" / "OPERATIONS.md").read_text()
    invokes = re.findall(r"aws lambda invoke(?:[^\n]*\\\n)*[^\n]*", runbook)
    assert len(invokes) >= 2
    for command in invokes:
        assert "--invocation-type Event" in command, command
    reserved = {
        name
        for name, function in stack.functions.functions.items()
        if t.to_json()["Resources"][stack.get_logical_id(function.node.default_child)][
            "Properties"
        ].get("ReservedConcurrentExecutions")
        == 1
    }
    assert {"backfill", "index"} <= reserved
    outputs = t.to_json()["Outputs"]
    for name in ("BackfillLogGroupName", "IndexLogGroupName"):
        assert name in outputs, name
        assert name in runbook, name


def test_the_waf_body_limit_and_its_cost_are_the_ones_the_runbook_states(dev: Any) -> None:
    """Issue 35, point 6: WAF inspects API Gateway bodies up to 16 KB at its base rate and
    bills larger ones extra
    (https://docs.aws.amazon.com/waf/latest/developerguide/web-acl-setting-body-inspection-limit.html);
    the stack's 64 KB limit, and what a smaller one would refuse, are in the cost table."""
    from grandbo.api.models import MAX_BODY_BYTES
    from grandbo.memory.domain.topic import MAX_TOPIC_CHARS

    _, t = dev
    (acl,) = t.find_resources("AWS::WAFv2::WebACL").values()
    limit = acl["Properties"]["AssociationConfig"]["RequestBody"]["API_GATEWAY"][
        "DefaultSizeInspectionLimit"
    ]
    assert limit == "KB_64"
    assert MAX_BODY_BYTES <= 64 * 1024  # the rules see every body the API takes, whole
    runbook = (ROOT / "docs" / "OPERATIONS.md").read_text()
    costs = runbook.split("## Costs the stack chooses")[1].split("\n## ")[0]
    assert f"`{limit}`" in costs
    assert f"{MAX_TOPIC_CHARS * 2:,} characters" in costs  # the query's largest topic
    assert MAX_TOPIC_CHARS * 2 < 16 * 1024  # an ASCII query body never passes 16 KB
