"""The VPC: private isolated subnets only, with interface endpoints for the data path."""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.checkov import LOG_GROUP_KMS, skip_checks


class Network(Construct):
    """No NAT: Lambdas reach SQS, Bedrock, Secrets Manager and X-Ray through endpoints."""

    def __init__(self, scope: Construct, construct_id: str, *, rerank: bool = False) -> None:
        super().__init__(scope, construct_id)
        self.vpc = ec2.Vpc(
            self,
            "Vpc",
            max_azs=2,
            nat_gateways=0,
            subnet_configuration=[
                ec2.SubnetConfiguration(
                    name="private", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED, cidr_mask=24
                )
            ],
        )
        flow_logs = logs.LogGroup(self, "FlowLogs", retention=logs.RetentionDays.ONE_MONTH)
        skip_checks(flow_logs, LOG_GROUP_KMS)
        self.vpc.add_flow_log(
            "FlowLog", destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_logs)
        )
        self.endpoint_security_group = ec2.SecurityGroup(
            self,
            "EndpointSg",
            vpc=self.vpc,
            description="Interface endpoints",
            allow_all_outbound=False,
        )
        self.endpoint_security_group.add_ingress_rule(
            ec2.Peer.ipv4(self.vpc.vpc_cidr_block), ec2.Port.tcp(443), "HTTPS from the VPC"
        )
        self.endpoints: dict[str, ec2.InterfaceVpcEndpoint] = {}
        for name, service in {
            "Sqs": ec2.InterfaceVpcEndpointAwsService.SQS,
            "BedrockRuntime": ec2.InterfaceVpcEndpointAwsService.BEDROCK_RUNTIME,
            "SecretsManager": ec2.InterfaceVpcEndpointAwsService.SECRETS_MANAGER,
            "XRay": ec2.InterfaceVpcEndpointAwsService.XRAY,
            # the optional reranker (`-c reranker=<model ARN>`): Bedrock's Rerank API
            **(
                {"BedrockAgentRuntime": ec2.InterfaceVpcEndpointAwsService.BEDROCK_AGENT_RUNTIME}
                if rerank
                else {}
            ),
        }.items():
            self.endpoints[name] = self.vpc.add_interface_endpoint(
                f"{name}Endpoint",
                service=service,
                private_dns_enabled=True,
                security_groups=[self.endpoint_security_group],
                subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED),
            )
        self.lambda_security_group = ec2.SecurityGroup(
            self, "LambdaSg", vpc=self.vpc, description="Grandbo Lambdas", allow_all_outbound=True
        )
