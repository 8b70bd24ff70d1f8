"""The admin API's organization routes: its health and repairs, settings and
calibration, offboarding (a purge in two steps), and its lake's export and import.
"""

from typing import Any

from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from grandbo.api.admin_models import (
    CalibrationRequest,
    ExportRequest,
    ImportRequest,
    PurgeConfirmation,
    PurgeRequest,
    RepairRequest,
    SettingsRequest,
)
from grandbo.api.auth import (
    PURGE_CONFIRMATION_S,
    Caller,
    mint_purge_confirmation,
    rows_digest,
    verify_purge_confirmation,
)
from grandbo.errors import (
    AuthenticationError,
    InvalidInputError,
)
from grandbo.memory.curation.audit import audit, repair_requested
from grandbo.memory.curation.curator import Curation
from grandbo.memory.lifecycle.lake import LakeTransfer
from grandbo.observability import logger, tracer
from grandbo.runtime.lambda_container import runtime

# a purge's confirmation token is an HMAC of the key that asked for it
_PURGE_NEEDS_A_KEY = (
    "a purge is requested and confirmed with an admin signing key, not an IAM identity"
)

router = APIGatewayRouter()  # type: ignore[no-untyped-call]


@router.get("/v1/admin/health")
def health() -> dict[str, Any]:
    """The organization's memory health (`grandbo.memory.curation.audit`), read-only: repairs are
    `grandbo audit --repair`, the sweeper and the hourly index job."""
    caller: Caller = router.context["caller"]
    return audit(runtime().service(), caller.tenant_id).as_dict()


@router.post("/v1/admin/health/repair")
@tracer.capture_method
def repair_health(request: RepairRequest) -> dict[str, Any]:
    """Repair the findings named (the projection rebuilt from the events, the expired
    retired, the missing vectors' jobs sent to the embed worker); each says what was done.
    A large organization's rebuild belongs to `grandbo audit --repair` from the VPC."""
    caller: Caller = router.context["caller"]
    health = repair_requested(runtime().service(), caller.tenant_id, request.checks)
    return health.as_dict()


@router.post("/v1/admin/calibration")
@tracer.capture_method
def calibrate(request: CalibrationRequest) -> dict[str, Any]:
    """Measure the organization's vector cutoff on its own lake (no labels), keep it for
    its queries, and report it (`grandbo.memory.vectors.cutoff`)."""
    caller: Caller = router.context["caller"]
    report = runtime().service().calibrate(caller.tenant_id, sample=request.sample)
    return report.as_dict()


@router.get("/v1/admin/settings")
def settings() -> dict[str, Any]:
    """The organization's settings: the episodic lifetime, and the vector cutoff in force
    beside the model's own."""
    caller: Caller = router.context["caller"]
    return Curation(runtime().service()).settings(caller.tenant_id).model_dump(mode="json")


@router.post("/v1/admin/settings")
@tracer.capture_method
def update_settings(request: SettingsRequest) -> dict[str, Any]:
    """How long new episodic entries are served (days from their creation), and the
    confidence floor of the organization's answers; answers the settings in force."""
    caller: Caller = router.context["caller"]
    service = runtime().service()
    if request.episodic_ttl_days is not None:
        service.set_episodic_ttl_days(caller.tenant_id, request.episodic_ttl_days)
    if request.retrieval_days is not None:
        service.set_retrieval_days(caller.tenant_id, request.retrieval_days)
    if request.min_confidence is not None or request.reset_min_confidence:
        service.set_min_confidence(caller.tenant_id, request.min_confidence)
    if request.reset_recalibration:
        service.reset_recalibration(caller.tenant_id)
    if request.query_rate_per_minute is not None or request.retrieval_rows_per_day is not None:
        service.set_log_bounds(
            caller.tenant_id,
            query_rate_per_minute=request.query_rate_per_minute,
            retrieval_rows_per_day=request.retrieval_rows_per_day,
        )
    return Curation(service).settings(caller.tenant_id).model_dump(mode="json")


@router.post("/v1/admin/purge")
@tracer.capture_method
def request_purge(request: PurgeRequest) -> dict[str, Any]:
    """Step one of offboarding: what a purge would delete, and its confirmation token."""
    caller: Caller = router.context["caller"]
    if caller.via == "iam":
        raise InvalidInputError("organization", _PURGE_NEEDS_A_KEY)
    if request.organization != caller.tenant_id:
        raise InvalidInputError("organization", "must name the organization this key belongs to")
    key = runtime().keyring().find(caller.key_id, "admin")
    rows, last_event = runtime().service().purge_state(caller.tenant_id)
    return {
        "organization": caller.tenant_id,
        "rows": rows,
        "last_event_id": last_event,
        "confirmation": mint_purge_confirmation(key, rows_digest(rows, last_event)),
        "confirm_within_s": PURGE_CONFIRMATION_S,
    }


@router.post("/v1/admin/purge/confirmation")
@tracer.capture_method
def confirm_purge(request: PurgeConfirmation) -> dict[str, Any]:
    """Step two: every row of the organization deleted, events included, and counted."""
    caller: Caller = router.context["caller"]
    if caller.via == "iam":
        raise InvalidInputError("organization", _PURGE_NEEDS_A_KEY)
    key = runtime().keyring().find(caller.key_id, "admin")
    rows, last_event = runtime().service().purge_state(caller.tenant_id)
    try:
        verify_purge_confirmation(key, request.confirmation, rows_digest(rows, last_event))
    except AuthenticationError as exc:
        raise InvalidInputError(
            "confirmation", f"{exc.reason}: request the purge again (POST /v1/admin/purge)"
        ) from exc
    # this container's retrievals asked before the purge are written before it, not after
    runtime().retrieval_writer.flush(2.0)
    deleted = runtime().service().purge_organization(caller.tenant_id)
    logger.warning("organization purged", extra={"deleted": deleted})
    return {"organization": caller.tenant_id, "deleted": deleted}


@router.post("/v1/admin/export")
@tracer.capture_method
def export_lake(request: ExportRequest) -> dict[str, Any]:
    """One page of the organization's event log, in event-id order; the last page
    (`next` null) carries the manifest (`grandbo.memory.domain.lake_stream`)."""
    caller: Caller = router.context["caller"]
    transfer = LakeTransfer(runtime().service())
    return transfer.export_page(caller.tenant_id, request.after, request.limit).as_dict()


@router.post("/v1/admin/import")
@tracer.capture_method
def import_lake(request: ImportRequest) -> dict[str, Any]:
    """One batch of a lake stream, checked against its manifest before anything of it is
    stored; the last batch rebuilds the projection and sends the embed jobs."""
    caller: Caller = router.context["caller"]
    outcome = LakeTransfer(runtime().service()).import_batch(
        caller.tenant_id,
        request.manifest,
        request.offset,
        request.chain_sha256,
        request.rest_sha256,
        request.events,
        rename=request.rename,
        merge=request.merge,
    )
    return outcome.as_dict()
