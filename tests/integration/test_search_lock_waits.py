"""The query path's self-scoped functions (grandbo_search, grandbo_pair_distances) wait
on a lock no longer than a tenant scope does (migration 0025; found by the issue-28
break-it pass): behind a lock held on the tenant's partition (a migration's DDL, an
operator's REINDEX or VACUUM FULL) they give up after the scope's lock_timeout — a 503
upstream, retried — where they waited for as long as it was held."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg

from grandbo.embedding.fake import FakeEmbeddingProvider
from grandbo.errors import StoreUnavailableError
from grandbo.memory.read.recall import LEG_LIMIT
from grandbo.memory.repository import MemoryRepository
from grandbo.memory.service import MemoryService
from grandbo.storage.connections import DatabaseUrls, connect
from grandbo.storage.tenant_scope import _BOUNDED_WAITS
from grandbo.text.tags import tokenize

from .helpers import context, entry

TOPIC = "checkout requests time out waiting for a database connection from the pool"
HELD_S = 11.0  # longer than the lock_timeout (8 s)
FUNCTIONS = ("grandbo_search", "grandbo_pair_distances")


def _outcome(call: Callable[[], Any], out: dict[str, Any]) -> None:
    start = time.monotonic()
    try:
        call()
        out["result"] = "answered"
    except Exception as exc:
        out["result"] = type(exc).__name__
    out["waited_s"] = time.monotonic() - start


def test_the_functions_wait_as_long_as_a_tenant_scope(admin_conn: psycopg.Connection[Any]) -> None:
    for name in FUNCTIONS:
        row = admin_conn.execute(
            "SELECT proconfig FROM pg_proc WHERE proname = %s", (name,)
        ).fetchone()
        assert row is not None
        assert f"lock_timeout={_BOUNDED_WAITS['lock_timeout']}" in row[0], (name, row)


def test_the_query_paths_statements_give_up_on_a_held_lock(
    service: MemoryService,
    database: DatabaseUrls,
    admin_conn: psycopg.Connection[Any],
    tenant: str,
    fake_provider: FakeEmbeddingProvider,
) -> None:
    ids = [
        service.record_entry(tenant, entry(f"Pool exhausted {n}", TOPIC), context()).entry.entry_id
        for n in range(3)
    ]
    service.embed_pending(tenant)
    row = admin_conn.execute(
        "SELECT tableoid::regclass::text FROM org_memory_entries WHERE tenant_id = %s LIMIT 1",
        (tenant,),
    ).fetchone()
    assert row is not None
    repos = {
        name: MemoryRepository(connect(database.app)) for name in ("search", "pairs", "scoped")
    }
    calls: dict[str, Callable[[], Any]] = {
        "pairs": lambda: repos["pairs"].distances_between(tenant, ids, fake_provider.embed_rev),
        # the statement in a tenant scope: the behaviour the functions must match
        "scoped": lambda: repos["scoped"].distances_in_scope(tenant, ids, fake_provider.embed_rev),
        "search": lambda: repos["search"].search(
            tenant,
            topic_tags=tokenize(TOPIC),
            topic_vector=fake_provider.embed([TOPIC])[0],
            embed_rev=fake_provider.embed_rev,
            vector_cutoff=2.0,
            services=None,
            leg_limit=LEG_LIMIT,
        ),
    }
    outcomes: dict[str, dict[str, Any]] = {name: {} for name in calls}
    locker = psycopg.connect(database.admin)
    threads = [
        threading.Thread(target=_outcome, args=(call, outcomes[name]), daemon=True)
        for name, call in calls.items()
    ]
    try:
        locker.execute(f"LOCK TABLE {row[0]} IN ACCESS EXCLUSIVE MODE")
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=HELD_S)
    finally:
        locker.rollback()
        locker.close()
        for thread in threads:
            thread.join(timeout=30)
    for name, out in outcomes.items():
        # a 503 (StoreUnavailableError) after the lock_timeout, not an answer once the
        # lock is let go
        assert out["result"] == StoreUnavailableError.__name__, (name, out)
        assert out["waited_s"] < HELD_S, (name, out)
