"""The one Logger, Metrics and Tracer of every Grandbo function (powertools singletons)."""

from __future__ import annotations

from aws_lambda_powertools import Logger, Metrics, Tracer

SERVICE = "grandbo"

logger = Logger(service=SERVICE)
metrics = Metrics(namespace="Grandbo", service=SERVICE)
tracer = Tracer(service=SERVICE)
