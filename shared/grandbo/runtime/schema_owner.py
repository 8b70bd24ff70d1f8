"""The schema owner's connection URL in AWS: its Secrets Manager secret, through RDS Proxy.

Used by the two functions that act as the owner: the migrations custom resource and the
hourly HNSW index job (index DDL needs the owner; no request path ever does).
"""

from __future__ import annotations

import os

from grandbo.runtime.lambda_container import database_url_from_secret
from grandbo.runtime.secrets import secret_value


def schema_owner_url() -> str:
    """The schema owner through RDS Proxy (GRANDBO_DB_HOST), TLS verify-full."""
    secret = secret_value(os.environ["GRANDBO_ADMIN_SECRET_ARN"])
    return database_url_from_secret(secret, os.environ.get("GRANDBO_DB_HOST"))
