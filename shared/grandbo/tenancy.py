"""Tenant identifiers: validated once at the edge, then stated in every query and RLS scope."""

from __future__ import annotations

import re

from grandbo.errors import InvalidInputError

_TENANT_ID = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")


def require_tenant(tenant_id: str) -> str:
    """Return a well-formed tenant id or raise; an empty tenant never reaches SQL."""
    if not isinstance(tenant_id, str) or not _TENANT_ID.fullmatch(tenant_id):
        raise InvalidInputError(
            "tenant_id",
            "must be 1-63 characters of lower-case letters, digits, '-' or '_', "
            "starting with a letter or digit",
        )
    return tenant_id
