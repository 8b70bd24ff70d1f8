"""Every alarm can reach a person (issue 35, point 1), read from the synthesized
templates: each alarm's action is a topic whose policy lets CloudWatch publish for that
alarm, encrypted with a key whose policy lets CloudWatch use it; and prod refuses to
synthesize with no one subscribed.

Rests on AWS's SNS guide, "Enable compatibility between event sources from AWS services
and encrypted topics" (a customer-managed key whose policy allows the service principal
kms:GenerateDataKey* and kms:Decrypt; with the AWS-managed key the publish is refused):
https://docs.aws.amazon.com/sns/latest/dg/sns-key-management.html#compatibility-with-aws-services
and on CloudWatch's alarm actions publishing as cloudwatch.amazonaws.com with the alarm's
ARN as aws:SourceArn:
https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/alarms-and-actions.html
"""

from __future__ import annotations

import fnmatch
from typing import Any

import pytest

from .conftest import PROD_ALARM_EMAIL, _synth

SERVICE = "cloudwatch.amazonaws.com"


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _allows(statement: dict[str, Any], action: str) -> bool:
    principal = statement.get("Principal", {})
    return (
        statement.get("Effect") == "Allow"
        and SERVICE in _as_list(principal.get("Service", []))
        and any(fnmatch.fnmatch(action, a) for a in _as_list(statement["Action"]))
    )


def _source_arn_pattern(statement: dict[str, Any]) -> str:
    """The alarm ARN pattern a statement is conditioned on, with the stack's pseudo
    parameters as the template writes them (Fn::Join of partition, region, account)."""
    pattern = statement["Condition"]["ArnLike"]["aws:SourceArn"]
    if isinstance(pattern, dict):
        parts = pattern["Fn::Join"][1]
        pattern = "".join(p if isinstance(p, str) else "*" for p in parts)
    assert statement["Condition"]["StringEquals"]["aws:SourceAccount"]
    return str(pattern)


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_every_alarm_reaches_a_topic_cloudwatch_may_publish_to_and_encrypt_for(
    stage: str, dev: Any, prod: Any
) -> None:
    stack, template = {"dev": dev, "prod": prod}[stage]
    resources = template.to_json()["Resources"]
    alarms = {k: v for k, v in resources.items() if v["Type"] == "AWS::CloudWatch::Alarm"}
    assert alarms
    topics = {k: v for k, v in resources.items() if v["Type"] == "AWS::SNS::Topic"}
    policies = [v for v in resources.values() if v["Type"] == "AWS::SNS::TopicPolicy"]
    keys = {k: v for k, v in resources.items() if v["Type"] == "AWS::KMS::Key"}
    for name, alarm in alarms.items():
        properties = alarm["Properties"]
        alarm_name = properties["AlarmName"]
        assert alarm_name.startswith(f"{stack.stack_name}-"), name
        actions = properties["AlarmActions"]
        assert actions, name
        for action in actions:
            (topic_id,) = [action["Ref"]]
            topic = topics[topic_id]
            # the topic's policy allows CloudWatch to publish, for this alarm
            statements = [
                s
                for p in policies
                if {"Ref": topic_id} in p["Properties"]["Topics"]
                for s in p["Properties"]["PolicyDocument"]["Statement"]
                if _allows(s, "sns:Publish")
            ]
            assert statements, f"{name}: no topic policy lets CloudWatch publish"
            arn = f"arn:aws:cloudwatch:us-east-1:123456789012:alarm:{alarm_name}"
            assert any(fnmatch.fnmatch(arn, _source_arn_pattern(s)) for s in statements)
            # the topic's key is ours, and its policy lets CloudWatch use it
            key_ref = topic["Properties"]["KmsMasterKeyId"]
            assert isinstance(key_ref, dict), "alias/aws/sns: CloudWatch cannot use it"
            key = keys[key_ref["Fn::GetAtt"][0]]
            key_statements = key["Properties"]["KeyPolicy"]["Statement"]
            for needed in ("kms:GenerateDataKey", "kms:Decrypt"):
                allowing = [s for s in key_statements if _allows(s, needed)]
                assert allowing, f"{name}: the key does not let CloudWatch {needed}"
                assert any(fnmatch.fnmatch(arn, _source_arn_pattern(s)) for s in allowing)
            assert key["Properties"]["EnableKeyRotation"] is True


def test_prod_refuses_to_synthesize_without_someone_its_alarms_reach() -> None:
    with pytest.raises(ValueError, match="alarm_email"):
        _synth("prod")


def test_prod_may_name_an_existing_topic_instead_of_an_address() -> None:
    operator = "arn:aws:sns:us-east-1:123456789012:oncall-chat"
    _, template = _synth("prod", alarm_topic_arn=operator)
    alarms = template.find_resources("AWS::CloudWatch::Alarm")
    assert alarms
    for alarm in alarms.values():
        assert operator in alarm["Properties"]["AlarmActions"]


def test_the_prod_address_is_subscribed(prod: Any) -> None:
    _, template = prod
    template.has_resource_properties(
        "AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": PROD_ALARM_EMAIL}
    )


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_the_event_archive_names_no_empty_key(stage: str, dev: Any, prod: Any) -> None:
    """aws-cdk issue 37847: `KmsKeyIdentifier: ""` is a deploy error in some regions;
    without it the archive is encrypted with an AWS owned key."""
    _, template = {"dev": dev, "prod": prod}[stage]
    (archive,) = template.find_resources("AWS::Events::Archive").values()
    assert "KmsKeyIdentifier" not in archive["Properties"]


def test_the_proxy_alarm_averages_its_nodes_over_several_periods(dev: Any) -> None:
    """RDS Proxy publishes AvailabilityPercentage per node of the proxy (statistics
    Average, Minimum, Maximum):
    https://docs.aws.amazon.com/AmazonRDS/latest/AuroraUserGuide/rds-proxy.monitoring.html
    The Minimum of one period paged on one node's missed health check."""
    from infra.alarms import PROXY_AVAILABILITY_PERCENT, PROXY_UNAVAILABLE_PERIODS

    _, template = dev
    (alarm,) = [
        a["Properties"]
        for a in template.find_resources("AWS::CloudWatch::Alarm").values()
        if a["Properties"].get("MetricName") == "AvailabilityPercentage"
    ]
    assert alarm["Statistic"] == "Average"
    assert alarm["Threshold"] == PROXY_AVAILABILITY_PERCENT < 100
    assert alarm["EvaluationPeriods"] == PROXY_UNAVAILABLE_PERIODS >= 3
    assert alarm["Period"] == 300


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_the_sweeper_alarm_waits_out_a_fresh_deploy_and_one_late_run(
    stage: str, dev: Any, prod: Any
) -> None:
    """Issue 35, point 6: dev's period (15 min) was shorter than its sweeper's interval
    (30 min): missing data breaches, so the alarm fired after every fresh deploy."""
    stack, template = {"dev": dev, "prod": prod}[stage]
    (alarm,) = [
        a["Properties"]
        for a in template.find_resources("AWS::CloudWatch::Alarm").values()
        if a["Properties"].get("MetricName") == "OldestUnembeddedAgeSeconds"
    ]
    interval = stack.stage.sweeper_minutes * 60
    assert alarm["Period"] >= interval  # every period holds a run
    assert alarm["Period"] * alarm["EvaluationPeriods"] > interval  # one missed run is not it
    assert alarm["TreatMissingData"] == "breaching"  # a sweeper that stopped still pages
