"""The CDK stacks, synthesized offline (no Docker, no bundling), checked property by property."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "18,20")

cdk = pytest.importorskip("aws_cdk", reason="install the infra extra: pip install -e '.[infra]'")
from aws_cdk.assertions import Annotations, Match, Template  # noqa: E402


def _resources(template: Template, kind: str) -> dict[str, Any]:
    return template.find_resources(kind)


def _functions(template: Template) -> dict[str, Any]:
    return {
        k: v
        for k, v in _resources(template, "AWS::Lambda::Function").items()
        if str(v["Properties"].get("Handler", "")).endswith(".handler.lambda_handler")
    }


def _by_description(template: Template, prefix: str) -> dict[str, Any]:
    (found,) = [
        v
        for v in _functions(template).values()
        if v["Properties"]["Description"].startswith(prefix)
    ]
    return dict(found["Properties"])


# -- network ------------------------------------------------------------------------------


def test_private_isolated_subnets_no_nat_and_endpoints_for_the_data_path(dev: Any) -> None:
    _, t = dev
    t.resource_count_is("AWS::EC2::NatGateway", 0)
    t.resource_count_is("AWS::EC2::InternetGateway", 0)
    endpoints = [
        str(v["Properties"]["ServiceName"]) for v in _resources(t, "AWS::EC2::VPCEndpoint").values()
    ]
    for service in ("sqs", "bedrock-runtime", "secretsmanager"):
        assert any(service in name for name in endpoints), service
    for function in _functions(t).values():
        assert "VpcConfig" in function["Properties"]


# -- database ------------------------------------------------------------------------------


def test_aurora_serverless_v2_with_pgvector_08_encrypted_and_backed_up(dev: Any) -> None:
    _, t = dev
    t.has_resource_properties(
        "AWS::RDS::DBCluster",
        {
            "Engine": "aurora-postgresql",
            "EngineVersion": "17.5",
            "StorageEncrypted": True,
            "BackupRetentionPeriod": 7,
            "ServerlessV2ScalingConfiguration": {"MinCapacity": 0.5, "MaxCapacity": 2},
        },
    )
    t.has_resource_properties("AWS::RDS::DBInstance", {"DBInstanceClass": "db.serverless"})
    t.has_resource_properties(
        "AWS::RDS::DBProxy", {"RequireTLS": True, "EngineFamily": "POSTGRESQL"}
    )
    cluster = next(iter(_resources(t, "AWS::RDS::DBCluster").values()))
    assert cluster["DeletionPolicy"] == "Snapshot"


def test_prod_keeps_its_data(prod: Any) -> None:
    _, t = prod
    cluster = next(iter(_resources(t, "AWS::RDS::DBCluster").values()))
    assert cluster["DeletionPolicy"] == "Retain"
    assert cluster["Properties"]["DeletionProtection"] is True
    assert cluster["Properties"]["BackupRetentionPeriod"] == 35


def test_migrations_run_on_every_deploy_through_a_custom_resource(dev: Any) -> None:
    _, t = dev
    (schema,) = _resources(t, "Custom::GrandboSchema").values()
    # the digest the migrations function compares to tell its own deploy from a rollback
    from grandbo.migrations import migrations_digest

    assert schema["Properties"]["MigrationsDigest"] == migrations_digest()
    # Lambda's longest timeout: the migration's statements are bounded to the time left
    assert _by_description(t, "grandbo migrations")["Timeout"] == 900


def test_the_migration_waits_for_the_proxys_target_and_the_writer(dev: Any, prod: Any) -> None:
    """Issue 23, item 5: CloudFormation waits only for what a resource depends on, and the
    proxy's endpoint exists before its target group registers the writer; the migration
    depends on the target group and the writer instance, not only on the proxy."""
    for _, t in (dev, prod):
        (schema,) = _resources(t, "Custom::GrandboSchema").values()
        depends = set(schema.get("DependsOn", []))
        (target_group,) = _resources(t, "AWS::RDS::DBProxyTargetGroup").keys()
        assert target_group in depends
        writers = [
            k
            for k, v in _resources(t, "AWS::RDS::DBInstance").items()
            if "Writer" in k and v["Properties"]["DBInstanceClass"] == "db.serverless"
        ]
        assert len(writers) == 1
        assert writers[0] in depends
        # issue 35, point 6: its first call reads the database secrets, through the VPC
        # endpoint of Secrets Manager (no NAT): CloudFormation must have made it first
        endpoints = [
            k
            for k, v in _resources(t, "AWS::EC2::VPCEndpoint").items()
            if "secretsmanager" in json.dumps(v["Properties"]["ServiceName"])
        ]
        assert len(endpoints) == 1
        assert endpoints[0] in depends


def test_hnsw_indexes_are_built_every_hour_by_their_own_function(dev: Any, prod: Any) -> None:
    """Issue 23, item 6: the hourly index job is not the migrations function, so an index
    build never throttles a deploy's migration (nor waits behind one)."""
    for _, t in (dev, prod):
        functions = _functions(t)
        (index_id,) = [
            k
            for k, v in functions.items()
            if v["Properties"]["Description"].startswith("grandbo index")
        ]
        (migrations_id,) = [
            k
            for k, v in functions.items()
            if v["Properties"]["Description"].startswith("grandbo migrations")
        ]
        (rule,) = [
            r["Properties"]
            for r in _resources(t, "AWS::Events::Rule").values()
            if r["Properties"].get("ScheduleExpression") == "rate(1 hour)"
        ]
        (target,) = rule["Targets"]
        assert target["Arn"] == {"Fn::GetAtt": [index_id, "Arn"]}
        (provider,) = [
            v
            for v in _resources(t, "AWS::Lambda::Function").values()
            if v["Properties"]
            .get("Environment", {})
            .get("Variables", {})
            .get("USER_ON_EVENT_FUNCTION_ARN")
        ]
        assert provider["Properties"]["Environment"]["Variables"]["USER_ON_EVENT_FUNCTION_ARN"] == {
            "Fn::GetAtt": [migrations_id, "Arn"]
        }
        index = functions[index_id]["Properties"]
        assert index["Handler"] == "functions.index_job.handler.lambda_handler"
        assert "GRANDBO_ADMIN_SECRET_ARN" in index["Environment"]["Variables"]


def test_no_reserved_concurrency_in_dev_and_what_prod_reserves_is_configured(
    dev: Any, prod: Any
) -> None:
    """Issue 23, item 8: Lambda keeps 100 of an account's concurrency unreserved ("You can
    reserve up to the Unreserved account concurrency value that is shown, minus 100":
    https://docs.aws.amazon.com/lambda/latest/dg/configuration-concurrency.html), and a new
    account's quota may be 10: dev reserves nothing; prod reserves what its config says."""
    from infra.config import stage_config

    _, t = dev
    assert all(
        "ReservedConcurrentExecutions" not in f["Properties"] for f in _functions(t).values()
    )
    _, t = prod
    reserved = stage_config("prod").reserved_concurrency
    assert reserved  # prod caps its writers and serializes its jobs
    for name, count in reserved.items():
        assert _by_description(t, f"grandbo {name}")["ReservedConcurrentExecutions"] == count
    total = sum(
        f["Properties"].get("ReservedConcurrentExecutions", 0) for f in _functions(t).values()
    )
    assert total == sum(reserved.values())


# -- functions ------------------------------------------------------------------------------


def test_every_function_uses_the_shared_layer_on_arm64_python(dev: Any) -> None:
    _, t = dev
    (layer_id,) = _resources(t, "AWS::Lambda::LayerVersion").keys()
    functions = _functions(t)
    assert len(functions) == 8
    for function in functions.values():
        props = function["Properties"]
        assert props["Layers"] == [{"Ref": layer_id}]
        assert props["Architectures"] == ["arm64"]
        assert props["Runtime"] == "python3.11"
        assert props["TracingConfig"] == {"Mode": "Active"}


def test_every_function_reaching_the_database_goes_through_the_proxy(dev: Any) -> None:
    # verify-full checks the proxy's certificate (ACM, Amazon Root CA): no function may
    # connect to the cluster's own endpoint, whose RDS CA certifi does not carry
    _, t = dev
    (proxy_id,) = _resources(t, "AWS::RDS::DBProxy").keys()
    for function in _functions(t).values():
        env = function["Properties"].get("Environment", {}).get("Variables", {})
        if "GRANDBO_DB_SECRET_ARN" in env or "GRANDBO_ADMIN_SECRET_ARN" in env:
            assert env["GRANDBO_DB_HOST"] == {"Fn::GetAtt": [proxy_id, "Endpoint"]}


def test_queries_read_through_the_proxys_read_only_endpoint_where_there_are_readers(
    dev: Any, prod: Any
) -> None:
    """Reads scale out: prod (a reader) gives the query function the proxy's read-only
    endpoint for its searches; every other function, and every function of dev (no
    reader), reads and writes through the default endpoint only."""
    _, t = prod
    ((endpoint_id, endpoint),) = _resources(t, "AWS::RDS::DBProxyEndpoint").items()
    (proxy_id,) = _resources(t, "AWS::RDS::DBProxy").keys()
    assert endpoint["Properties"]["TargetRole"] == "READ_ONLY"
    assert endpoint["Properties"]["DBProxyName"] == {"Ref": proxy_id}
    for function in _functions(t).values():
        env = function["Properties"].get("Environment", {}).get("Variables", {})
        if function["Properties"]["Description"].startswith("grandbo query"):
            assert env["GRANDBO_DB_READ_HOST"] == {"Fn::GetAtt": [endpoint_id, "Endpoint"]}
            assert env["GRANDBO_DB_HOST"] == {"Fn::GetAtt": [proxy_id, "Endpoint"]}
        else:
            assert "GRANDBO_DB_READ_HOST" not in env
    _, t = dev
    assert _resources(t, "AWS::RDS::DBProxyEndpoint") == {}
    assert (
        "GRANDBO_DB_READ_HOST"
        not in (_by_description(t, "grandbo query")["Environment"]["Variables"])
    )


def test_sizing_and_concurrency(dev: Any) -> None:
    _, t = dev
    assert _by_description(t, "grandbo query")["Timeout"] == 10
    assert _by_description(t, "grandbo embed")["Timeout"] == 60
    env = _by_description(t, "grandbo query")["Environment"]["Variables"]
    assert env["GRANDBO_EMBEDDING_PROVIDER"] == "titan"
    assert "GRANDBO_DB_HOST" in env
    assert "GRANDBO_DB_SECRET_ARN" in env


def test_the_query_path_runs_without_the_xray_sdk_the_write_path_with_it(dev: Any) -> None:
    _, t = dev
    for name, wanted in (
        ("query", "false"),
        ("authorizer", "false"),
        ("admin", "true"),
        ("incident", "true"),
        ("embed", "true"),
        ("backfill", "true"),
    ):
        env = _by_description(t, f"grandbo {name}")["Environment"]["Variables"]
        assert env["GRANDBO_XRAY_SDK"] == wanted, name


# -- messaging ------------------------------------------------------------------------------


def test_embed_queue_redrive_visibility_and_partial_batch_failures(dev: Any) -> None:
    _, t = dev
    queues = _resources(t, "AWS::SQS::Queue")
    (embed,) = [q for q in queues.values() if q["Properties"].get("VisibilityTimeout") == 6 * 60]
    assert embed["Properties"]["RedrivePolicy"]["maxReceiveCount"] >= 5
    t.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {
            "FunctionResponseTypes": ["ReportBatchItemFailures"],
            "BatchSize": 10,
            "ScalingConfig": {"MaximumConcurrency": 2},
        },
    )


def test_the_sweeper_runs_on_its_schedule(dev: Any) -> None:
    _, t = dev
    t.has_resource_properties("AWS::Events::Rule", {"ScheduleExpression": "rate(30 minutes)"})


# -- API ------------------------------------------------------------------------------------


def test_api_stage_throttling_access_logs_validation_and_authorizer(dev: Any) -> None:
    _, t = dev
    t.has_resource_properties(
        "AWS::ApiGateway::Stage",
        {
            "StageName": "dev",
            "AccessLogSetting": Match.object_like({"DestinationArn": Match.any_value()}),
            "MethodSettings": Match.array_with(
                [Match.object_like({"ThrottlingRateLimit": 20, "ThrottlingBurstLimit": 40})]
            ),
        },
    )
    t.has_resource_properties("AWS::ApiGateway::Authorizer", {"Type": "REQUEST"})
    t.has_resource_properties("AWS::ApiGateway::RequestValidator", {"ValidateRequestBody": True})
    methods = [m["Properties"] for m in _resources(t, "AWS::ApiGateway::Method").values()]
    custom = [m for m in methods if m.get("AuthorizationType") == "CUSTOM"]
    assert {m["HttpMethod"] for m in custom} == {"POST", "GET"}  # query + get entry
    assert any(m["HttpMethod"] == "ANY" for m in methods)  # signed admin routes
    t.resource_count_is("AWS::WAFv2::WebACLAssociation", 1)


def test_the_waf_lets_bodies_through_up_to_the_apis_own_limit(dev: Any) -> None:
    # issue 12, item 4: the managed rule set's 8 KB body cap is counted, not blocking, and
    # the API's 64 KB limit is enforced by a rule of its own over the whole body
    import json

    from grandbo.api.edge import BODY_TOO_LARGE
    from grandbo.api.models import MAX_BODY_BYTES

    _, t = dev
    (acl,) = _resources(t, "AWS::WAFv2::WebACL").values()
    props = acl["Properties"]
    rules = {rule["Name"]: rule for rule in props["Rules"]}
    managed = rules["AWSManagedRulesCommonRuleSet"]["Statement"]["ManagedRuleGroupStatement"]
    assert {"Name": "SizeRestrictions_BODY", "ActionToUse": {"Count": {}}} in managed[
        "RuleActionOverrides"
    ]
    size = rules["BodyOverApiLimit"]
    # answered with the edge's own 413 document, as the local gateway answers it
    response = size["Action"]["Block"]["CustomResponse"]
    assert response["ResponseCode"] == BODY_TOO_LARGE.status
    body = props["CustomResponseBodies"][response["CustomResponseBodyKey"]]
    assert json.loads(body["Content"]) == BODY_TOO_LARGE.document()
    constraint = size["Statement"]["SizeConstraintStatement"]
    assert (constraint["ComparisonOperator"], constraint["Size"]) == ("GT", MAX_BODY_BYTES)
    assert constraint["FieldToMatch"]["Body"]["OversizeHandling"] == "MATCH"
    inspection = props["AssociationConfig"]["RequestBody"]["API_GATEWAY"]
    assert inspection["DefaultSizeInspectionLimit"] == "KB_64"
    assert MAX_BODY_BYTES == 64 * 1024  # the inspection limit covers the whole limit


def test_named_resources_are_named_per_stage(dev: Any, prod: Any) -> None:
    # issue 12, item 6: two stages can share an account and a region
    for stage, (_, t) in (("dev", dev), ("prod", prod)):
        (proxy,) = _resources(t, "AWS::RDS::DBProxy").values()
        assert proxy["Properties"]["DBProxyName"] == f"grandbo-{stage}"
        (api,) = _resources(t, "AWS::ApiGateway::RestApi").values()
        assert api["Properties"]["Name"] == f"grandbo-{stage}"


# -- IAM -------------------------------------------------------------------------------------


def _statements(t: Template) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for policy_id, policy in _resources(t, "AWS::IAM::Policy").items():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            out.append((policy_id, statement))
    return out


def test_bedrock_invoke_only_on_the_titan_v2_model(dev: Any) -> None:
    _, t = dev
    bedrock = [s for _, s in _statements(t) if "bedrock" in str(s["Action"])]
    # query, embed worker, admin (it calibrates: embeds titles), the index job (it fits
    # each organization's confidence on questions from its lake)
    assert len(bedrock) == 4
    for statement in bedrock:
        assert statement["Action"] == "bedrock:InvokeModel"
        assert "foundation-model/amazon.titan-embed-text-v2:0" in str(statement["Resource"])
        assert statement["Resource"] != "*"


def test_the_keyring_is_readable_only_by_the_authorizer_and_admin(dev: Any) -> None:
    stack, t = dev
    keyring_id = stack.resolve(stack.functions.keyring.secret_arn)["Ref"]
    readers = {
        policy_id
        for policy_id, s in _statements(t)
        if "secretsmanager:GetSecretValue" in str(s["Action"]) and keyring_id in str(s["Resource"])
    }
    assert len(readers) == 2
    assert all("Authorizer" in p or "Admin" in p for p in readers)


# -- alarms and checks ----------------------------------------------------------------------


def test_alarms_for_dead_letters_embed_errors_5xx_and_unembedded_age(dev: Any) -> None:
    _, t = dev
    alarms = [a["Properties"] for a in _resources(t, "AWS::CloudWatch::Alarm").values()]
    names = {a.get("MetricName") for a in alarms}
    assert {
        "ApproximateNumberOfMessagesVisible",
        "Errors",
        "5XXError",
        "OldestUnembeddedAgeSeconds",
        "EmbedFailures",
    } <= names
    assert sum(a.get("MetricName") == "ApproximateNumberOfMessagesVisible" for a in alarms) == 2
    assert all(a["AlarmActions"] for a in alarms)


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_cdk_nag_reports_no_unsuppressed_error(stage: str, dev: Any, prod: Any) -> None:
    stack, _ = dev if stage == "dev" else prod
    errors = Annotations.from_stack(stack).find_error(
        "*", Match.string_like_regexp("AwsSolutions-.*")
    )
    assert [e.entry.data for e in errors] == []
    warnings = Annotations.from_stack(stack).find_warning(
        "*", Match.string_like_regexp("AwsSolutions-.*")
    )
    assert [w.entry.data for w in warnings] == []


def test_the_embed_worker_has_time_for_a_record_past_its_deadline_margin(dev: Any) -> None:
    # issue 12, item 9: a record starts only with DEADLINE_MARGIN_MS left, so the function
    # must live long enough for at least one record after the margin check passes
    from functions.embed_worker.handler import DEADLINE_MARGIN_MS

    _, t = dev
    (embed,) = [
        f["Properties"]
        for f in _resources(t, "AWS::Lambda::Function").values()
        if str(f["Properties"].get("Description", "")).startswith("grandbo embed:")
    ]
    assert embed["Timeout"] * 1000 >= 2 * DEADLINE_MARGIN_MS


def test_the_alarms_an_on_call_engineer_needs(dev: Any) -> None:
    # issue 12, item 12, with the thresholds docs/OPERATIONS.md documents
    from infra.alarms import (
        AURORA_CONNECTIONS,
        AURORA_CPU_PERCENT,
        EMBED_QUEUE_OLDEST_S,
        OLDEST_UNEMBEDDED_THRESHOLD_S,
    )

    stack, t = dev
    alarms = [a["Properties"] for a in _resources(t, "AWS::CloudWatch::Alarm").values()]
    by_metric: dict[str, list[dict[str, Any]]] = {}
    for alarm in alarms:
        by_metric.setdefault(alarm.get("MetricName", ""), []).append(alarm)
    assert by_metric["ApproximateAgeOfOldestMessage"][0]["Threshold"] == EMBED_QUEUE_OLDEST_S
    # every function: errors (the embed worker's with its retry tolerance) and throttles
    functions = len(stack.functions.functions)  # Grandbo's own, not CDK's helper functions
    assert len(by_metric["Throttles"]) == functions
    assert len(by_metric["Errors"]) == functions
    assert by_metric["ServerlessDatabaseCapacity"][0]["Threshold"] == stack.stage.max_acu
    assert by_metric["CPUUtilization"][0]["Threshold"] == AURORA_CPU_PERCENT
    assert by_metric["DatabaseConnections"][0]["Threshold"] == AURORA_CONNECTIONS
    proxy = by_metric["AvailabilityPercentage"][0]
    assert proxy["TreatMissingData"] == "breaching"
    sweeper = by_metric["OldestUnembeddedAgeSeconds"][0]
    assert sweeper["Threshold"] == OLDEST_UNEMBEDDED_THRESHOLD_S
    assert sweeper["TreatMissingData"] == "breaching"  # a dead sweeper pages
    assert all(a["AlarmActions"] for a in alarms)
    (topic,) = _resources(t, "AWS::SNS::Topic").values()
    assert topic["Properties"]["KmsMasterKeyId"]


def test_alarm_email_subscribes_to_the_topic() -> None:
    import aws_cdk as cdk
    from app import build_app

    app = cdk.App(
        context={"aws:cdk:bundling-stacks": [], "stage": "dev", "alarm_email": "oncall@x.test"}
    )
    _, stack = build_app(app)
    Template.from_stack(stack).has_resource_properties(
        "AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": "oncall@x.test"}
    )


def test_an_operator_can_replay_without_reading_the_code(dev: Any) -> None:
    # issue 12, item 11: outputs for what the runbook names, an archive of incident-closed
    # events, and one least-privilege policy for the replays
    _, t = dev
    outputs = t.to_json()["Outputs"]
    for name in (
        "EmbedQueueUrl",
        "EmbedDeadLetterQueueArn",
        "EmbedDeadLetterQueueUrl",
        "IncidentDeadLetterQueueUrl",
        "IncidentArchiveArn",
        "BackfillFunctionName",
        "OperatorPolicyArn",
    ):
        assert name in outputs, name
    (archive,) = _resources(t, "AWS::Events::Archive").values()
    assert archive["Properties"]["RetentionDays"] == 14
    assert archive["Properties"]["EventPattern"]["detail-type"] == ["IncidentClosed"]
    (policy,) = _resources(t, "AWS::IAM::ManagedPolicy").values()
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    actions = {
        a
        for s in statements
        for a in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])
    }
    assert actions >= {"lambda:InvokeFunction", "sqs:StartMessageMoveTask", "events:StartReplay"}
    assert all(s["Resource"] != "*" for s in statements)


def test_prod_fails_over_to_a_reader_and_keeps_its_secrets_with_its_data(
    dev: Any, prod: Any
) -> None:
    # issue 12, item 13 (without the TLS part, see the note)
    _, p = prod
    instances = [i["Properties"] for i in _resources(p, "AWS::RDS::DBInstance").values()]
    assert len(instances) == 2
    assert all(i["EnablePerformanceInsights"] for i in instances)
    assert sorted(i.get("PromotionTier") for i in instances) == [0, 1]  # reader in tier 1
    secrets = _resources(p, "AWS::SecretsManager::Secret")
    database_secrets = [s for name, s in secrets.items() if "Database" in name]
    assert len(database_secrets) == 2  # the schema owner's and the application role's
    assert all(s["DeletionPolicy"] == "Retain" for s in database_secrets)
    retention = [r["Properties"] for r in _resources(p, "Custom::LogRetention").values()]
    assert any(
        r["RetentionInDays"] == 90 and "postgresql" in str(r["LogGroupName"]) for r in retention
    )
    _, d = dev
    assert len(_resources(d, "AWS::RDS::DBInstance")) == 1


def test_cdk_nag_suppressions_sit_on_resources_each_with_a_reason(dev: Any) -> None:
    # issue 12: none for the whole stack; each names its rule and says why
    _, t = dev
    assert "cdk_nag" not in (t.to_json().get("Metadata") or {})
    suppressed = [
        rule
        for resource in t.to_json()["Resources"].values()
        for rule in resource.get("Metadata", {}).get("cdk_nag", {}).get("rules_to_suppress", [])
    ]
    assert suppressed
    assert all(
        rule["id"].startswith("AwsSolutions-") and len(rule["reason"]) > 40 for rule in suppressed
    )


def test_a_model_change_may_invoke_the_previous_model_too() -> None:
    from infra.functions import TITAN_EMBED_V2, bedrock_models

    assert bedrock_models("titan", None) == [TITAN_EMBED_V2]
    assert bedrock_models("titan", "titan:amazon.titan-embed-text-v1") == [
        "amazon.titan-embed-text-v1",
        TITAN_EMBED_V2,
    ]
    assert bedrock_models("titan", "local") == [TITAN_EMBED_V2]  # nothing more to grant


def test_python_313_is_one_context_value_away() -> None:
    from infra.config import stage_config
    from infra.stack import GrandboStack

    app = cdk.App(context={"aws:cdk:bundling-stacks": [], "python": "3.13"})
    stack = GrandboStack(app, "Grandbo-py313", stage=stage_config("dev"))
    template = Template.from_stack(stack)
    runtimes = {
        f["Properties"]["Runtime"]
        for f in template.find_resources("AWS::Lambda::Function").values()
        if f["Properties"].get("Runtime", "").startswith("python")
    }
    assert runtimes == {"python3.13"}
    (layer,) = template.find_resources("AWS::Lambda::LayerVersion").values()
    assert layer["Properties"]["CompatibleRuntimes"] == ["python3.13"]


def test_the_reranker_is_off_unless_a_deployment_names_one(dev: Any, reranking: Any) -> None:
    """Off by default: no environment, permission or endpoint. `-c reranker=<ARN>`: the
    functions that answer a memory query (the query route and the admin search the console
    shows as Beacon sees it) get it, may invoke that model and call Rerank, and reach
    Bedrock's agent runtime through an interface endpoint (the VPC has no NAT)."""
    from tests.infra.conftest import RERANK_MODEL

    def endpoints(t: Any) -> list[str]:
        return [
            str(e["Properties"]["ServiceName"])
            for e in _resources(t, "AWS::EC2::VPCEndpoint").values()
        ]

    _, t = dev
    assert all(
        "GRANDBO_RERANKER" not in f["Properties"]["Environment"]["Variables"]
        for f in _functions(t).values()
        if "Environment" in f["Properties"]
    )
    assert not any("bedrock-agent-runtime" in e for e in endpoints(t))
    stack, t = reranking
    for function in _functions(t).values():
        env = function["Properties"].get("Environment", {}).get("Variables", {})
        description = function["Properties"]["Description"]
        if description.startswith(("grandbo query", "grandbo admin")):
            assert env["GRANDBO_RERANKER"] == f"bedrock:{RERANK_MODEL}"
        else:
            assert "GRANDBO_RERANKER" not in env
    rerankers = {
        policy["Properties"]["Roles"][0]["Ref"]
        for policy in _resources(t, "AWS::IAM::Policy").values()
        if any(
            s["Action"] == "bedrock:Rerank"
            for s in policy["Properties"]["PolicyDocument"]["Statement"]
        )
    }
    assert len(rerankers) == 2  # the query and the admin functions' roles
    assert any("bedrock-agent-runtime" in e for e in endpoints(t))
    statements = [
        s
        for policy in _resources(t, "AWS::IAM::Policy").values()
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
    ]
    assert {"Action": "bedrock:InvokeModel", "Effect": "Allow", "Resource": RERANK_MODEL} in (
        statements
    )
    assert any(s["Action"] == "bedrock:Rerank" for s in statements)
    errors = Annotations.from_stack(stack).find_error(
        "*", Match.string_like_regexp("AwsSolutions-.*")
    )
    assert [e.entry.data for e in errors] == []
