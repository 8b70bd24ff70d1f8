"""Backfill and sweeper: enqueue every active entry lacking a current vector, retire
the episodic entries past their lifetime (an event each, never a delete), and fill the
title flag of tag postings written before migration 0014.

Invoked on demand with `{"tenant_id": "acme"}` (one tenant) or `{}` (all), and by the
schedule as the sweeper (all tenants). Each job names its own tenant.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from grandbo.errors import GrandboError
from grandbo.observability import bind_request_keys, logger, metrics, tracer
from grandbo.runtime.lambda_container import runtime

# How long a sent embed job counts as in flight: longer than SQS takes to deliver, retry
# and dead-letter it (5 receives x the 6-minute visibility timeout)
IN_FLIGHT_S = 30 * 60
# Expired episodic entries retired per run (~10 ms each): a backlog is worked off over a
# few runs and never holds up the embed backfill that follows
EXPIRED_PER_RUN = 5_000
# Entries whose pre-0014 postings get their title flag per run (one UPDATE each, ~1 ms)
TITLE_TAGS_PER_RUN = 5_000


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    bind_request_keys()  # nothing of the previous invocation's caller
    scheduled = event.get("detail-type") == "Scheduled Event"
    tenant = None if scheduled else event.get("tenant_id")
    queue = runtime().embed_queue
    if queue is None:
        raise GrandboError("GRANDBO_EMBED_QUEUE_URL is not set")
    # a job sent within the window is still in flight (SQS retries it, then its DLQ keeps
    # it): not sent again unless an operator forces a replay
    window = None if event.get("force") is True else IN_FLIGHT_S
    expired = runtime().service().retire_expired(tenant, limit=EXPIRED_PER_RUN)
    metrics.add_metric("EpisodicEntriesExpired", MetricUnit.Count, expired)
    titled = runtime().service().mark_title_tags(tenant, limit=TITLE_TAGS_PER_RUN)
    # tags as written of entries from before migration 0041 (none once filled: one
    # indexed probe per tenant)
    given = runtime().service().fill_given_tags(tenant)
    forgotten = runtime().service().forget_expired_retrievals(tenant)
    metrics.add_metric("RetrievalsForgotten", MetricUnit.Count, forgotten)
    enqueued = 0
    for page in runtime().service().pending_job_pages(tenant, claim_for_s=window):
        queue.send(page)
        enqueued += len(page)
    metrics.add_metric("BackfillEnqueued", MetricUnit.Count, enqueued)
    oldest = runtime().service().oldest_pending_age_s(tenant)
    metrics.add_metric("OldestUnembeddedAgeSeconds", MetricUnit.Seconds, oldest)
    logger.info(
        "backfill enqueued",
        extra={
            "tenant_id": tenant or "*",
            "jobs": enqueued,
            "expired": expired,
            "title_tags_marked": titled,
            "given_tags_filled": given,
            "oldest_unembedded_age_s": oldest,
            "retrievals_forgotten": forgotten,
        },
    )
    return {
        "enqueued": enqueued,
        "expired": expired,
        "title_tags_marked": titled,
        "given_tags_filled": given,
        "retrievals_forgotten": forgotten,
        "tenant_id": tenant,
        "oldest_unembedded_age_s": oldest,
    }
