"""Aurora PostgreSQL Serverless v2 with pgvector 0.8, RDS Proxy, and the two secrets."""

from __future__ import annotations

from aws_cdk import CfnResource, Duration, RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_rds as rds
from cdk_nag import NagPackSuppression, NagSuppressions
from constructs import Construct

from grandbo.storage.connections import CONNECT_TIMEOUT_S
from infra.checkov import SECRET_CMK, skip_checks
from infra.config import StageConfig
from infra.network import Network
from infra.retention import retention

# Aurora PostgreSQL 17.5 ships pgvector 0.8.0 (iterative index scans).
ENGINE_VERSION = rds.AuroraPostgresEngineVersion.VER_17_5
DATABASE_NAME = "grandbo"
APP_ROLE = "grandbo_app"


class Database(Construct):
    """The one store: encrypted, backed up, behind RDS Proxy; admin and app role secrets."""

    def __init__(
        self, scope: Construct, construct_id: str, *, network: Network, stage: StageConfig
    ) -> None:
        super().__init__(scope, construct_id)
        self.security_group = ec2.SecurityGroup(
            self, "DbSg", vpc=network.vpc, description="Aurora", allow_all_outbound=False
        )
        self.cluster = rds.DatabaseCluster(
            self,
            "Cluster",
            engine=rds.DatabaseClusterEngine.aurora_postgres(version=ENGINE_VERSION),
            credentials=rds.Credentials.from_generated_secret("grandbo_admin"),
            default_database_name=DATABASE_NAME,
            writer=rds.ClusterInstance.serverless_v2("Writer", enable_performance_insights=True),
            # prod: a Serverless v2 reader in the writer's failover tier (it scales with the
            # writer and is promoted first), so a writer failure is a failover, not an outage
            readers=(
                [
                    rds.ClusterInstance.serverless_v2(
                        "Reader", scale_with_writer=True, enable_performance_insights=True
                    )
                ]
                if stage.failover_reader
                else []
            ),
            serverless_v2_min_capacity=stage.min_acu,
            serverless_v2_max_capacity=stage.max_acu,
            vpc=network.vpc,
            vpc_subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED),
            security_groups=[self.security_group],
            storage_encrypted=True,
            backup=rds.BackupProps(retention=Duration.days(stage.backup_days)),
            deletion_protection=stage.deletion_protection,
            removal_policy=RemovalPolicy.RETAIN if stage.retain_data else RemovalPolicy.SNAPSHOT,
            iam_authentication=True,
            cloudwatch_logs_exports=["postgresql"],
            cloudwatch_logs_retention=retention(stage.log_retention_days),
            # OS metrics every minute (memory, swap, processes) beside Performance Insights
            monitoring_interval=Duration.seconds(60),
        )
        NagSuppressions.add_resource_suppressions(
            self.cluster.node.find_child("MonitoringRole"),
            [
                NagPackSuppression(
                    id="AwsSolutions-IAM4",
                    reason="AmazonRDSEnhancedMonitoringRole is the AWS-maintained policy RDS "
                    "needs to publish enhanced-monitoring metrics; it grants nothing else.",
                    applies_to=[
                        "Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
                        "AmazonRDSEnhancedMonitoringRole"
                    ],
                )
            ],
        )
        assert self.cluster.secret is not None
        self.admin_secret = self.cluster.secret
        data_removal = RemovalPolicy.RETAIN if stage.retain_data else RemovalPolicy.DESTROY
        # the credentials live as long as the data they open: a retained cluster keeps them
        generated = self.cluster.node.find_child("Secret").node.default_child
        assert isinstance(generated, CfnResource)
        generated.apply_removal_policy(data_removal)
        skip_checks(generated, SECRET_CMK)
        self.cluster.add_rotation_single_user(automatically_after=Duration.days(30))
        self.app_secret = rds.DatabaseSecret(
            self, "AppSecret", username=APP_ROLE, master_secret=self.admin_secret
        )
        self.app_secret.attach(self.cluster)
        self.app_secret.apply_removal_policy(data_removal)
        skip_checks(self.app_secret, SECRET_CMK)
        self.proxy = self.cluster.add_proxy(
            "Proxy",
            # a proxy's name is unique per account and region: one per stage
            db_proxy_name=f"grandbo-{stage.name}",
            secrets=[self.admin_secret, self.app_secret],
            vpc=network.vpc,
            vpc_subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED),
            security_groups=[self.security_group],
            require_tls=True,
            debug_logging=False,
            # a saturated pool answers a waiting client with an error within this (then a
            # 503, retried) instead of holding it past the query function's 10 s timeout;
            # the default is 120 s
            borrow_timeout=Duration.seconds(CONNECT_TIMEOUT_S),
        )
        # Reads scale out (a stage with readers): the proxy's read-only endpoint spreads
        # connections over the Aurora readers; the query function reads through it, every
        # write goes to the default (read/write) endpoint. Without a reader there is none.
        self.read_endpoint: rds.CfnDBProxyEndpoint | None = None
        if stage.failover_reader:
            self.read_endpoint = rds.CfnDBProxyEndpoint(
                self,
                "ProxyReadOnly",
                db_proxy_name=self.proxy.db_proxy_name,
                db_proxy_endpoint_name=f"grandbo-{stage.name}-read-only",
                vpc_subnet_ids=network.vpc.select_subnets(
                    subnet_type=ec2.SubnetType.PRIVATE_ISOLATED
                ).subnet_ids,
                vpc_security_group_ids=[self.security_group.security_group_id],
                target_role="READ_ONLY",
            )
        # what a first connection through the proxy needs: its target group (the writer
        # registered as its target) and the writer instance itself (schema.py waits on it)
        self.ready = [
            self.proxy.node.find_child("ProxyTargetGroup"),
            self.cluster.node.find_child("Writer"),
        ]
        self.security_group.add_ingress_rule(
            self.security_group, ec2.Port.tcp(5432), "RDS Proxy to Aurora"
        )
        self.security_group.add_ingress_rule(
            network.lambda_security_group, ec2.Port.tcp(5432), "Lambdas to the proxy and cluster"
        )
