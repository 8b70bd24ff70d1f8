"""Issue 35, point 2: in prod, queries read from the reader.

The read-only endpoint is a proxy endpoint the stack creates, and RDS Proxy does not
support VERIFY_IDENTITY (libpq's verify-full) on endpoints you create, only on the
proxy's default endpoint (AWS's RDS Proxy TLS section:
https://docs.aws.amazon.com/AmazonRDS/latest/AuroraUserGuide/rds-proxy.howitworks.html#rds-proxy-security.tls):
every reader connection failed and fell back to the writer, silently. The reader is now
opened with verify-ca (the chain is still checked against the bundle's Amazon roots), a
fallback is a metric with an alarm, and a query says where its searches ran
(`metadata.read_from`, from pg_is_in_recovery(): tests/integration/test_read_routing.py
on a real hot standby).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from psycopg.conninfo import conninfo_to_dict

from grandbo.runtime import lambda_container
from grandbo.runtime.lambda_container import LambdaEnvironment, LambdaRuntime

SECRET = json.dumps(
    {"host": "cluster.example", "port": 5432, "username": "grandbo_app", "password": "p"}
)


def _query_env(template: Any) -> dict[str, Any]:
    (function,) = [
        f["Properties"]
        for f in template.find_resources("AWS::Lambda::Function").values()
        if f["Properties"].get("Description", "").startswith("grandbo query:")
    ]
    return dict(function["Environment"]["Variables"])


def test_prod_queries_read_through_the_proxys_read_only_endpoint(prod: Any, dev: Any) -> None:
    _, t = prod
    (endpoint_id, endpoint), *more = t.find_resources("AWS::RDS::DBProxyEndpoint").items()
    assert not more
    assert endpoint["Properties"]["TargetRole"] == "READ_ONLY"
    assert _query_env(t)["GRANDBO_DB_READ_HOST"] == {"Fn::GetAtt": [endpoint_id, "Endpoint"]}
    _, d = dev
    assert "GRANDBO_DB_READ_HOST" not in _query_env(d)  # one instance: nothing to read from


def test_the_reader_is_opened_with_a_tls_mode_its_endpoint_accepts_the_writer_verify_full(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("grandbo.runtime.secrets.secret_value", lambda arn, **_: SECRET)
    runtime = LambdaRuntime(
        LambdaEnvironment.model_validate(
            {
                "GRANDBO_DB_SECRET_ARN": "arn:aws:secretsmanager:us-east-1:0:secret:app",
                "GRANDBO_DB_HOST": "grandbo-prod.proxy-x.us-east-1.rds.amazonaws.com",
                "GRANDBO_DB_READ_HOST": "reads.endpoint.proxy-x.us-east-1.rds.amazonaws.com",
            }
        )
    )
    assert runtime.reads_scale_out
    reader = conninfo_to_dict(runtime._database_url(reader=True))
    writer = conninfo_to_dict(runtime._database_url())
    assert reader["host"].startswith("reads.endpoint.")
    assert reader["sslmode"] == lambda_container.READER_SSLMODE == "verify-ca"
    assert writer["sslmode"] == lambda_container.WRITER_SSLMODE == "verify-full"
    for url in (reader, writer):  # both check the chain against the bundle's roots
        with open(str(url["sslrootcert"]), encoding="utf-8") as bundle:
            assert "CN=Amazon Root CA 1 " in bundle.read()


def test_reads_on_the_writer_page_where_a_stage_has_a_reader(prod: Any, dev: Any) -> None:
    from infra.alarms import READER_FALLBACK_PERIODS

    _, p = prod
    (alarm,) = [
        a["Properties"]
        for a in p.find_resources("AWS::CloudWatch::Alarm").values()
        if a["Properties"].get("MetricName") == "ReaderFallbacks"
    ]
    assert alarm["Namespace"] == "Grandbo"
    assert alarm["Statistic"] == "Sum"
    assert alarm["Threshold"] == 0
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
    assert alarm["EvaluationPeriods"] == alarm["DatapointsToAlarm"] == READER_FALLBACK_PERIODS
    assert alarm["TreatMissingData"] == "notBreaching"  # no query, no fallback
    _, d = dev
    assert not [
        a
        for a in d.find_resources("AWS::CloudWatch::Alarm").values()
        if a["Properties"].get("MetricName") == "ReaderFallbacks"
    ]
