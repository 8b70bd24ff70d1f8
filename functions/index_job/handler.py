"""Hourly: every organization past the HNSW threshold gets its index on its partition, then
every organization due a confidence fit gets one from its own lake.

Its own function, apart from the migrations custom resource: a deploy's migration never
waits for an index build, and an index build never throttles a deploy. The confidence fit
(`grandbo.memory.lifecycle.confidence_fit`) runs for an organization with no fit of the
embedding revision it is served from (new, or re-embedded since) or one older than a week,
as the application role, while the run's time lasts; one that is not reached is fitted by
the next run, and a fit's failure never fails the index build before it.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from grandbo.memory.lifecycle.confidence_fit import fit_due
from grandbo.memory.repository.vector_indexes import ensure_hnsw_indexes
from grandbo.observability import logger
from grandbo.runtime.lambda_container import runtime
from grandbo.runtime.schema_owner import schema_owner_url

# what a run keeps for itself after its last fit (the reply, the log line)
_MARGIN_S = 30.0


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    indexed = ensure_hnsw_indexes(schema_owner_url())
    logger.info("hnsw indexes ensured", extra={"hnsw_indexed": indexed})
    try:
        fits = fit_due(
            runtime().service(),
            time_left_s=lambda: context.get_remaining_time_in_millis() / 1000 - _MARGIN_S,
        )
    except Exception as exc:  # the fit is the job's second part: the index build stands
        logger.exception("confidence fits failed; the next run retries")
        return {"hnsw_indexed": indexed, "confidence_fits": {}, "confidence_error": str(exc)}
    logger.info("confidence fits", extra={"confidence_fits": fits})
    return {"hnsw_indexed": indexed, "confidence_fits": fits}
