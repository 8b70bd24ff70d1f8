"""Hourly: every organization past the HNSW threshold gets its index on its partition.

Its own function, apart from the migrations custom resource: a deploy's migration never
waits for an index build, and an index build never throttles a deploy.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from grandbo.memory.repository.vector_indexes import ensure_hnsw_indexes
from grandbo.observability import logger
from grandbo.runtime.schema_owner import schema_owner_url


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    indexed = ensure_hnsw_indexes(schema_owner_url())
    logger.info("hnsw indexes ensured", extra={"hnsw_indexed": indexed})
    return {"hnsw_indexed": indexed}
