"""Issue 35, point 3, over the template: the incident-closed rule delivers to a queue, the
queue to the function, and its receives outlast an hour of database trouble.

EventBridge invoking a function directly is an asynchronous invocation: a function error
gets Lambda's two retries, then the event is dead-lettered
(https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-error-handling.html); the
rule's retry policy covers only delivery
(https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-rule-retry-policy.html).
Behind a queue, the queue's receives and visibility decide
(https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-configure.html: a visibility
timeout of at least six times the function's timeout;
https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-dead-letter-queues.html).
"""

from __future__ import annotations

from typing import Any

import pytest
from infra.functions import SPECS

from grandbo.runtime.incident_queue import (
    MAX_RECEIVES,
    VISIBILITY_TIMEOUT_S,
    retry_delay_s,
    time_before_dead_letter_s,
)

HOUR_S = 3600


def _resources(template: Any, kind: str) -> dict[str, Any]:
    return {k: v for k, v in template.to_json()["Resources"].items() if v["Type"] == kind}


def _operator_grants(template: Any) -> dict[str, list[Any]]:
    """The operator policy's resources, by action."""
    (policy,) = _resources(template, "AWS::IAM::ManagedPolicy").values()
    grants: dict[str, list[Any]] = {}
    for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
        actions = statement["Action"]
        for action in actions if isinstance(actions, list) else [actions]:
            resources = statement["Resource"]
            grants.setdefault(action, []).extend(
                resources if isinstance(resources, list) else [resources]
            )
    return grants


def _incident_function_id(template: Any) -> str:
    (found,) = [
        k
        for k, v in _resources(template, "AWS::Lambda::Function").items()
        if v["Properties"].get("Description", "").startswith("grandbo incident:")
    ]
    return found


def _incident_mapping(template: Any) -> dict[str, Any]:
    """The incident function's event source mapping."""
    function = _incident_function_id(template)
    (mapping,) = [
        v["Properties"]
        for v in _resources(template, "AWS::Lambda::EventSourceMapping").values()
        if v["Properties"]["FunctionName"] == {"Ref": function}
    ]
    return mapping


def _incident_queue(template: Any) -> tuple[str, dict[str, Any]]:
    """The queue the incident function's event source mapping reads."""
    queue_id = _incident_mapping(template)["EventSourceArn"]["Fn::GetAtt"][0]
    return queue_id, _resources(template, "AWS::SQS::Queue")[queue_id]["Properties"]


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_the_rule_delivers_to_the_incident_queue_not_the_function(
    stage: str, dev: Any, prod: Any
) -> None:
    _, t = dev if stage == "dev" else prod
    queue_id, _ = _incident_queue(t)
    (rule,) = [
        v["Properties"]
        for v in _resources(t, "AWS::Events::Rule").values()
        if v["Properties"].get("EventPattern", {}).get("source") == ["landfall.incidents"]
    ]
    (target,) = rule["Targets"]
    assert target["Arn"] == {"Fn::GetAtt": [queue_id, "Arn"]}
    assert "InputTransformer" not in target  # the event itself is the body
    assert "Input" not in target
    # a delivery SQS refuses is retried, then kept with the same body in the same DLQ
    assert target["RetryPolicy"] == {"MaximumRetryAttempts": 8, "MaximumEventAgeInSeconds": 86400}
    _, queue = _incident_queue(t)
    dlq_id = queue["RedrivePolicy"]["deadLetterTargetArn"]["Fn::GetAtt"][0]
    assert target["DeadLetterConfig"]["Arn"] == {"Fn::GetAtt": [dlq_id, "Arn"]}
    # no asynchronous invocation of the function is left to dead-letter anything
    assert _resources(t, "AWS::Lambda::EventInvokeConfig") == {}
    permissions = _resources(t, "AWS::Lambda::Permission").values()
    function = _incident_function_id(t)
    assert not [
        p
        for p in permissions
        if p["Properties"]["Principal"] == "events.amazonaws.com"
        and p["Properties"]["FunctionName"] == {"Fn::GetAtt": [function, "Arn"]}
    ]


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_the_queue_outlasts_an_hour_of_failures_and_reports_records_one_by_one(
    stage: str, dev: Any, prod: Any
) -> None:
    _, t = dev if stage == "dev" else prod
    _, queue = _incident_queue(t)
    assert queue["MessageRetentionPeriod"] == 14 * 86400  # SQS's longest
    assert queue["VisibilityTimeout"] == VISIBILITY_TIMEOUT_S
    assert queue["VisibilityTimeout"] >= 6 * SPECS["incident"].timeout_s
    assert queue["RedrivePolicy"]["maxReceiveCount"] == MAX_RECEIVES
    # with the function's back-off, and without it (an invocation that timed out)
    assert time_before_dead_letter_s() >= 2 * HOUR_S
    assert MAX_RECEIVES * VISIBILITY_TIMEOUT_S >= 2 * HOUR_S
    assert all(retry_delay_s(n) <= VISIBILITY_TIMEOUT_S * 2 for n in range(1, 40))
    mapping = _incident_mapping(t)
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["BatchSize"] * 5 < SPECS["incident"].timeout_s  # a 5 s connect each
    assert 2 <= mapping["ScalingConfig"]["MaximumConcurrency"] <= 10


def test_the_function_knows_its_queues_and_may_dead_letter_and_back_off(dev: Any) -> None:
    _, t = dev
    function_id = _incident_function_id(t)
    function = _resources(t, "AWS::Lambda::Function")[function_id]["Properties"]
    env = function["Environment"]["Variables"]
    queue_id, queue = _incident_queue(t)
    dlq_id = queue["RedrivePolicy"]["deadLetterTargetArn"]["Fn::GetAtt"][0]
    assert env["GRANDBO_INCIDENT_QUEUE_URL"] == {"Ref": queue_id}
    assert env["GRANDBO_INCIDENT_DLQ_URL"] == {"Ref": dlq_id}
    role = function["Role"]["Fn::GetAtt"][0]
    allowed: dict[str, set[str]] = {}
    for policy in _resources(t, "AWS::IAM::Policy").values():
        if {"Ref": role} not in policy["Properties"]["Roles"]:
            continue
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = statement["Action"]
            resources = statement["Resource"]
            for resource in resources if isinstance(resources, list) else [resources]:
                if not isinstance(resource, dict) or "Fn::GetAtt" not in resource:
                    continue  # "*" (X-Ray) or an ARN built with Fn::Join
                name = str(resource["Fn::GetAtt"][0])
                allowed.setdefault(name, set()).update(
                    actions if isinstance(actions, list) else [actions]
                )
    assert "sqs:ChangeMessageVisibility" in allowed[queue_id]  # the back-off
    assert "sqs:SendMessage" in allowed[dlq_id]  # a refused event, at once
    assert "sqs:SendMessage" not in allowed.get(queue_id, set())


def test_the_runbook_redrive_names_outputs_the_operator_policy_covers(dev: Any) -> None:
    """docs/OPERATIONS.md's move tasks: the operator may start each on its source queue and
    send to its destination (SQS's StartMessageMoveTask moves as the caller:
    https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_StartMessageMoveTask.html)."""
    import re
    from pathlib import Path

    _, t = dev
    runbook = (Path(__file__).resolve().parents[2] / "docs" / "OPERATIONS.md").read_text()
    tasks = re.findall(
        r'start-message-move-task --source-arn "\$(\w+)"(?:\s*\\\s*)?\s*'
        r'(?:--destination-arn "\$(\w+)")?',
        runbook,
    )
    assert ("IncidentDeadLetterQueueArn", "IncidentQueueArn") in tasks
    outputs = t.to_json()["Outputs"]
    grants = _operator_grants(t)
    for source, destination in tasks:
        assert outputs[source]["Value"] in grants["sqs:StartMessageMoveTask"], source
        if destination:
            assert outputs[destination]["Value"] in grants["sqs:SendMessage"], destination


def test_the_operator_may_run_the_smoke_check_and_nothing_wider(dev: Any) -> None:
    """`grandbo smoke --stage`: DescribeStacks on this stack, the keyring, PutEvents on the
    stage's bus, Publish on its alarm topic with that topic's key (SNS needs the publisher
    to use the topic's KMS key: https://docs.aws.amazon.com/sns/latest/dg/sns-key-management.html)."""
    import json

    from grandbo.smoke.targets import OUTPUTS

    _, t = dev
    outputs = t.to_json()["Outputs"]
    assert set(OUTPUTS) <= set(outputs)
    grants = _operator_grants(t)
    assert grants["secretsmanager:GetSecretValue"] == [outputs["KeyringSecretArn"]["Value"]]
    assert grants["sns:Publish"] == [outputs["AlarmTopicArn"]["Value"]]
    (bus_id,) = _resources(t, "AWS::Events::EventBus").keys()
    assert grants["events:PutEvents"] == [{"Fn::GetAtt": [bus_id, "Arn"]}]
    (key_id,) = [
        k
        for k, v in _resources(t, "AWS::KMS::Key").items()
        if "alarm" in v["Properties"].get("Description", "").lower()
    ]
    assert grants["kms:GenerateDataKey*"] == [{"Fn::GetAtt": [key_id, "Arn"]}]
    (stack_arn,) = grants["cloudformation:DescribeStacks"]
    assert ":stack/Grandbo-dev/*" in json.dumps(stack_arn)
    assert all(r != "*" for resources in grants.values() for r in resources)
