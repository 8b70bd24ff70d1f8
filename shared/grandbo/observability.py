"""The one Logger, Metrics and Tracer of every Grandbo function (powertools singletons)."""

from __future__ import annotations

from aws_lambda_powertools import Logger, Metrics, Tracer

SERVICE = "grandbo"

logger = Logger(service=SERVICE)
metrics = Metrics(namespace="Grandbo", service=SERVICE)
# Patch only botocore (Bedrock, SQS, Secrets Manager calls): auto-patching every library
# X-Ray knows imports them all at cold start.
tracer = Tracer(service=SERVICE, patch_modules=["botocore"])
