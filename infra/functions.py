"""Every Grandbo Lambda: one thin handler each, all on the shared `grandbo` layer."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from aws_cdk import Aws, Duration
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sqs as sqs
from cdk_nag import NagPackSuppression, NagSuppressions
from constructs import Construct

from grandbo.api.iam_people import IamPeople
from grandbo.embedding.factory import PROVIDER_SPEC
from grandbo.embedding.rerank import RERANKER_SPEC
from infra.checkov import ENV_KMS, LOG_GROUP_KMS, SECRET_CMK, skip_checks
from infra.config import StageConfig
from infra.database import Database
from infra.layer import layer_code, python_target
from infra.network import Network
from infra.retention import retention

ROOT = Path(__file__).resolve().parents[1]


def function_handler(folder: str) -> str:
    """A function's handler as a dotted module path: its code keeps the `functions`
    package around it, so a handler imports its folder's other modules (the admin API's
    routes by area) as `functions.<folder>.<module>`, as the local runner does. Lambda
    reads a handler in a subfolder package as `folder.file.function`
    (https://docs.aws.amazon.com/lambda/latest/dg/python-handler.html#naming)."""
    return f"functions.{folder}.handler.lambda_handler"


def function_source(folder: str) -> Path:
    """The function's code as Lambda unzips it: `functions/__init__.py` and the folder's
    Python files (no bytecode: the developer's interpreter's would be stale there), staged
    anew at every synth in build/function-code/<folder> (kept: a synth without asset
    staging, `cdk synth --no-staging`, points at it; the asset's hash is its files' and
    their paths')."""
    staged = ROOT / "build" / "function-code" / folder
    shutil.rmtree(staged, ignore_errors=True)
    package = staged / "functions"
    package.mkdir(parents=True)
    shutil.copy2(ROOT / "functions" / "__init__.py", package / "__init__.py")
    shutil.copytree(
        ROOT / "functions" / folder,
        package / folder,
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    return staged


TITAN_EMBED_V2 = "amazon.titan-embed-text-v2:0"
PROVIDER = "titan"
# `-c previous_embedding_provider=titan:<old model id>` during a model change: tenants are
# served from that model until each has switched (blue/green, docs/OPERATIONS.md)
PREVIOUS_PROVIDER_CONTEXT = "previous_embedding_provider"
# `-c reranker=<Bedrock reranking model ARN>`: the query function reranks its fused
# candidates with it (off without; issue 13's reranker stage, README)
RERANKER_CONTEXT = "reranker"


# The functions that answer a memory query: Beacon's route, and the admin search the
# curation console shows "as Beacon sees it"
RERANKING = ("query", "admin")


def bedrock_models(*specs: str | None) -> list[str]:
    """The Bedrock model ids the named providers invoke (`titan` is Titan v2)."""
    return sorted(
        {
            spec.partition(":")[2] or TITAN_EMBED_V2
            for spec in specs
            if spec and spec.startswith("titan")
        }
    )


@dataclass(frozen=True)
class FunctionSpec:
    """Sizing, with the reason for each choice."""

    folder: str
    memory_mb: int
    timeout_s: int
    why: str
    # X-Ray SDK subsegments (grandbo.observability): off on the query path, where the
    # SDK's import would add ~190 ms to every cold start; Lambda's managed tracing stays on
    xray_sdk: bool = True


SPECS = {
    "query": FunctionSpec(
        "query_api",
        512,
        10,
        "interactive: one Titan call + 3 SQL statements, ~50 ms warm; "
        "API Gateway's 29 s cap is far off",
        xray_sdk=False,
    ),
    "authorizer": FunctionSpec(
        "authorizer",
        256,
        5,
        "HMAC check only, results cached 5 minutes by API Gateway",
        xray_sdk=False,
    ),
    "admin": FunctionSpec("admin_api", 512, 15, "a write is one short transaction"),
    "incident": FunctionSpec(
        "incident_closed", 512, 30, "up to 50 findings per event, one short transaction"
    ),
    "embed": FunctionSpec(
        "embed_worker", 512, 60, "10 Titan calls per batch; concurrency capped on the event source"
    ),
    "backfill": FunctionSpec("backfill", 512, 300, "pages through every tenant"),
    # Lambda's longest: a migration's statements are bounded to the time left
    # (grandbo.migrations), and docs/OPERATIONS.md says how large a lake each can move
    "migrations": FunctionSpec(
        "migrations", 512, 900, "schema changes on deploy, serialized by an advisory lock"
    ),
    # its own function: a deploy's migration never waits behind an index build, and an
    # hourly build never throttles a deploy (a shared reserved concurrency of 1 did)
    "index": FunctionSpec(
        "index_job",
        512,
        900,
        "per-organization HNSW indexes and confidence fits, hourly, outside any deploy",
    ),
}


SYNCHRONOUS = (
    "invoked synchronously by API Gateway: the caller gets the error, and a dead-letter "
    "queue only ever receives asynchronous invocations"
)
# checkov CKV_AWS_116: where each function's failures go instead of a function DLQ
FAILURES_GO_TO = {
    "query": SYNCHRONOUS,
    "authorizer": SYNCHRONOUS,
    "admin": SYNCHRONOUS,
    "incident": "an SQS event source (the incident queue): a failed record is backed off and "
    "retried for about two hours, then moved to IncidentDlq by the queue's redrive policy; "
    "the rule's archive keeps every event for replays",
    "embed": "an SQS event source: failed records return to the embed queue, whose redrive "
    "policy moves them to EmbedDlq",
    "backfill": "run by a schedule: the next run redoes a failed one, and the "
    "oldest-unembedded alarm fires when runs keep failing",
    "migrations": "invoked synchronously by the deploy's custom-resource provider, which "
    "fails (and rolls back) the deploy on error",
    "index": "run by an hourly schedule: the next run builds what a failed one did not, and "
    "the audit reports an organization past the threshold without its index",
}
# checkov CKV_AWS_115, for a function without reserved concurrency: why it needs none
UNRESERVED = {
    "query": "interactive: a reserved cap would throttle queries under load; RDS Proxy "
    "bounds the database connections",
    "authorizer": "interactive, and its answers are cached 5 minutes by API Gateway",
    "admin": "interactive writes, one short transaction each; RDS Proxy bounds connections",
    "embed": "capped on its SQS event source (maxConcurrency), which never throttles the "
    "way a reserved cap would",
    "incident": "unreserved in this stage (StageConfig.reserved_concurrency): its SQS event "
    "source caps it (maxConcurrency) and RDS Proxy bounds the connections",
    "backfill": "unreserved in this stage: two overlapping sweeps enqueue the same jobs, "
    "which the embed worker's revision guard makes harmless",
    "migrations": "unreserved in this stage: deploys are serialized by CloudFormation and "
    "the migrations by a transaction-level advisory lock",
    "index": "unreserved in this stage: runs of the hourly schedule cannot overlap, each "
    "ending within its 900 s timeout, and the schedule does not retry",
}


IAM_PEOPLE_CONTEXT = "iam_people"


def iam_people_document(given: object) -> str:
    """The stack's mapping of permission sets to organizations and roles, as the admin
    function reads it: `-c iam_people='[{"permission_set": "GrandboAcmeCurators",
    "tenant_id": "acme", "role": "curator"}, ...]'` (a JSON list, or nothing: no person
    signs in with IAM). Checked here: a deployment never carries a mapping it refuses."""
    if given in (None, ""):
        return json.dumps({"permission_sets": []})
    listed = json.loads(given) if isinstance(given, str) else given
    document = json.dumps({"permission_sets": listed}, sort_keys=True)
    IamPeople.from_json(document)  # GrandboError names what is wrong
    return document


class Functions(Construct):
    """The Lambdas, their environment, and least-privilege grants."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        network: Network,
        database: Database,
        embed_queue: sqs.IQueue,
        stage: StageConfig,
    ) -> None:
        super().__init__(scope, construct_id)
        # `-c python=3.13`: the runtime and the layer built for it (infra/layer.py)
        python = python_target(self.node.try_get_context("python"))
        self.python = python
        self.layer = lambda_.LayerVersion(
            self,
            "GrandboLayer",
            code=layer_code(python),
            compatible_runtimes=[python.runtime],
            compatible_architectures=[lambda_.Architecture.ARM_64],
            description="grandbo repository layer + runtime dependencies",
        )
        self.keyring = secretsmanager.Secret(
            self,
            "Keyring",
            description='Grandbo signing keys: {"keys": [{key_id, tenant_id, secret, roles}]}',
            generate_secret_string=secretsmanager.SecretStringGenerator(
                secret_string_template='{"keys": []}',  # noqa: S106 - an empty keyring
                generate_string_key="unused",
            ),
        )
        previous = self.node.try_get_context(PREVIOUS_PROVIDER_CONTEXT)
        if previous is not None and not re.fullmatch(PROVIDER_SPEC, str(previous)):
            raise ValueError(f"{PREVIOUS_PROVIDER_CONTEXT}: not a provider: {previous!r}")
        common_env = {
            "GRANDBO_DB_SECRET_ARN": database.app_secret.secret_arn,
            "GRANDBO_DB_HOST": database.proxy.endpoint,
            "GRANDBO_EMBEDDING_PROVIDER": PROVIDER,
            "GRANDBO_EMBED_QUEUE_URL": embed_queue.queue_url,
            "POWERTOOLS_SERVICE_NAME": "grandbo",
            "POWERTOOLS_METRICS_NAMESPACE": "Grandbo",
            "POWERTOOLS_LOG_LEVEL": "INFO",
            "GRANDBO_STAGE": stage.name,
        }
        if previous is not None:
            common_env["GRANDBO_PREVIOUS_EMBEDDING_PROVIDER"] = str(previous)
        reranker = self.node.try_get_context(RERANKER_CONTEXT)
        if reranker is not None and not re.fullmatch(RERANKER_SPEC, f"bedrock:{reranker}"):
            raise ValueError(f"{RERANKER_CONTEXT}: not a Bedrock model ARN: {reranker!r}")
        self.functions: dict[str, lambda_.Function] = {}
        for name, spec in SPECS.items():
            env = dict(common_env)
            env["GRANDBO_XRAY_SDK"] = "true" if spec.xray_sdk else "false"
            if name in ("authorizer", "admin"):
                env["GRANDBO_KEYRING_SECRET_ARN"] = self.keyring.secret_arn
            if name == "admin":
                # which Identity Center permission sets are whose people (-c iam_people)
                env["GRANDBO_IAM_PEOPLE"] = iam_people_document(
                    self.node.try_get_context(IAM_PEOPLE_CONTEXT)
                )
            # the admin function answers the console's search and "why not this one?"
            # (POST /v1/admin/query, /explanation): the order Beacon gets, reranked alike
            if name in RERANKING and reranker is not None:
                env["GRANDBO_RERANKER"] = f"bedrock:{reranker}"
            # a maintenance statement (a rebuild, a purge, an import's last batch: the
            # tenant's exclusive lock or a snapshot) ends before its function does; RDS
            # Proxy passes no cancel on (migration 0031 bounds every other one at 9 s)
            env["GRANDBO_MAINTENANCE_STATEMENT_TIMEOUT"] = f"{spec.timeout_s - 1}s"
            if name == "query" and database.read_endpoint is not None:
                # its searches on the readers (feedback, a write, still on the writer)
                env["GRANDBO_DB_READ_HOST"] = database.read_endpoint.attr_endpoint
            if name in ("migrations", "index"):
                env = {
                    "GRANDBO_ADMIN_SECRET_ARN": database.admin_secret.secret_arn,
                    "GRANDBO_DB_SECRET_ARN": database.app_secret.secret_arn,
                    # through the proxy too: its certificate is the one verify-full checks
                    "GRANDBO_DB_HOST": database.proxy.endpoint,
                    "POWERTOOLS_SERVICE_NAME": "grandbo",
                }
            if name == "index":
                # the confidence fit searches each organization's questions as the
                # application role, embedding them with the model it is served from
                env["GRANDBO_EMBEDDING_PROVIDER"] = PROVIDER
                env["GRANDBO_STAGE"] = stage.name
                if previous is not None:
                    env["GRANDBO_PREVIOUS_EMBEDDING_PROVIDER"] = str(previous)
            function = lambda_.Function(
                self,
                f"{name.title()}Function",
                description=f"grandbo {name}: {spec.why}",
                runtime=python.runtime,
                architecture=lambda_.Architecture.ARM_64,
                handler=function_handler(spec.folder),
                code=lambda_.Code.from_asset(str(function_source(spec.folder))),
                layers=[self.layer],
                memory_size=spec.memory_mb,
                timeout=Duration.seconds(spec.timeout_s),
                reserved_concurrent_executions=stage.reserved_concurrency.get(name),
                environment=env,
                tracing=lambda_.Tracing.ACTIVE,
                vpc=network.vpc,
                vpc_subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED),
                security_groups=[network.lambda_security_group],
                log_group=self._log_group(f"{name.title()}Logs", stage),
            )
            self.functions[name] = function
            skip_checks(function, ENV_KMS, ("CKV_AWS_116", FAILURES_GO_TO[name]))
            if name not in stage.reserved_concurrency:
                skip_checks(function, ("CKV_AWS_115", UNRESERVED[name]))

        skip_checks(self.keyring, SECRET_CMK)
        for name in ("query", "admin", "incident", "embed", "backfill", "index"):
            database.app_secret.grant_read(self.functions[name])
        for name in ("migrations", "index"):
            database.admin_secret.grant_read(self.functions[name])
        database.app_secret.grant_read(self.functions["migrations"])
        for name in ("authorizer", "admin"):
            self.keyring.grant_read(self.functions[name])
        # the embed worker re-sends the records it defers near its deadline (a deferral
        # must not spend a record's receives: functions/embed_worker)
        for name in ("admin", "incident", "backfill", "embed"):
            embed_queue.grant_send_messages(self.functions[name])
        titan = iam.PolicyStatement(
            actions=["bedrock:InvokeModel"],
            resources=[
                f"arn:{Aws.PARTITION}:bedrock:{Aws.REGION}::foundation-model/{model}"
                for model in bedrock_models(PROVIDER, previous)
            ],
        )
        # the admin function embeds titles when it calibrates an organization's cutoff, the
        # index job the questions it fits an organization's confidence on
        for name in ("query", "embed", "admin", "index"):
            self.functions[name].add_to_role_policy(titan)
        for name in RERANKING if reranker is not None else ():
            function = self.functions[name]
            function.add_to_role_policy(
                iam.PolicyStatement(actions=["bedrock:InvokeModel"], resources=[str(reranker)])
            )
            function.add_to_role_policy(
                iam.PolicyStatement(actions=["bedrock:Rerank"], resources=["*"])
            )
            NagSuppressions.add_resource_suppressions(
                function,
                [
                    NagPackSuppression(
                        id="AwsSolutions-IAM5",
                        reason="bedrock:Rerank has no resource-level permissions; the model "
                        "it may use is bounded by the InvokeModel statement on its one ARN.",
                        applies_to=["Resource::*"],
                    )
                ],
                apply_to_children=True,
            )

    def _log_group(self, construct_id: str, stage: StageConfig) -> logs.LogGroup:
        group = logs.LogGroup(self, construct_id, retention=retention(stage.log_retention_days))
        skip_checks(group, LOG_GROUP_KMS)
        return group
