"""A purge requested while the organization's agents ask stays confirmable (issue 51's
per-caller day, migration 0038, must not move the purge's digest)."""

from __future__ import annotations

from typing import Any

import psycopg

from .conftest import Gateway
from .test_retrieval_log import TOPIC, _rows


def test_a_new_caller_asking_between_request_and_confirmation_does_not_refuse_the_purge(
    gateway: Gateway, tenant: str, admin_conn: psycopg.Connection[Any]
) -> None:
    # Given an organization with a lesson, whose purge is requested before anyone asked
    # today
    lesson = {
        "title": "Checkout requests time out waiting for a database connection",
        "summary": "Connections leaked by refund batches were never returned to the pool.",
    }
    assert gateway.admin(tenant, "POST", "/v1/admin/entries", lesson).status == 201
    asked = gateway.admin(tenant, "POST", "/v1/admin/purge", {"organization": tenant})
    assert asked.status == 200, asked.body

    # When an agent asks (its first question of the day: a new per-caller row), and the
    # log has written it before the confirmation arrives
    assert gateway.query(tenant, {"topic": TOPIC, "incident_id": "INC-P"}).status == 200
    assert gateway.runtime.retrieval_writer.flush(10)

    # Then the purge is still confirmed, and nothing of the organization is left
    done = gateway.admin(
        tenant,
        "POST",
        "/v1/admin/purge/confirmation",
        {"confirmation": asked.body["confirmation"]},
    )
    assert done.status == 200, done.body
    assert _rows(admin_conn, tenant) == 0
