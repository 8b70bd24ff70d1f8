"""Custom resource: apply pending migrations and set the application role's password.

Create and Update migrate (idempotent: applied versions are skipped, edited ones refused);
Delete does nothing — data outlives the stack's custom resource. An event whose migrations
digest is not the one bundled here is a rollback (CloudFormation sends the old properties
to the function while it still runs the new code): it succeeds without touching the
schema, so a failed deploy can always roll back. HNSW index builds are the index job's
(functions/index_job), never inside a deploy's time limit.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from grandbo.migrations import migrate, migrations_digest, set_app_role_password
from grandbo.observability import logger
from grandbo.runtime.schema_owner import schema_owner_url
from grandbo.runtime.secrets import secret_value

PHYSICAL_ID = "grandbo-schema"
# what the function keeps of its time after the migrations: the role's password, the reply
MARGIN_S = 30


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    if event.get("RequestType") == "Delete":
        return {"PhysicalResourceId": event.get("PhysicalResourceId", PHYSICAL_ID)}
    wanted = (event.get("ResourceProperties") or {}).get("MigrationsDigest")
    if wanted != migrations_digest():
        logger.warning("migrations of another deploy (a rollback): schema left as it is")
        return {"PhysicalResourceId": event.get("PhysicalResourceId", PHYSICAL_ID)}
    url = schema_owner_url()
    # every statement ends before the function does: a statement left running after a
    # timeout would keep its locks, and the retried deploy would wait on them
    deadline = time.monotonic() + context.get_remaining_time_in_millis() / 1000 - MARGIN_S
    applied = migrate(url, deadline=deadline)
    app_secret = json.loads(secret_value(os.environ["GRANDBO_DB_SECRET_ARN"]))
    set_app_role_password(url, app_secret["password"])
    logger.info("schema migrated", extra={"applied": [f"{m.version}_{m.name}" for m in applied]})
    return {
        "PhysicalResourceId": PHYSICAL_ID,
        "Data": {"Applied": ",".join(str(m.version) for m in applied)},
    }
