"""A redaction's scrub at a year's log (issue 52, point 1), as production runs it: a
database of its own, the log's spellings and their search function owned by a role that
is neither superuser nor BYPASSRLS (as Aurora's master user), one million questions of one
organization, a secret planted in three of them in other spellings, and the redaction made
as the application role with the deployed statement bound (9 s: `bench.redaction_scale`).

PostgreSQL uses a qual as an index condition ahead of a row-level-security policy only
when its operator is LEAKPROOF, and LIKE is not
(https://www.postgresql.org/docs/current/ddl-rowsecurity.html): as the application role,
the trigram search cannot use its index; as the owner of a table whose security is not
forced, it does (the plans below say so), and that is the one path the scrub searches by.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from bench.redaction_scale import (
    load_log,
    owned_as_in_aurora,
    owner_plan,
    plant,
    redact_as_the_application,
)

from grandbo.storage.connections import DatabaseUrls, connect

ROWS = 1_000_000
TENANT = "scale-org"
SECRET = "Zq7vK2mP9xL4tR8w"
SPELT = "zq7vk2mp9xl4tr8w"


@pytest.fixture(scope="module")
def year_of_questions(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DatabaseUrls]:
    from grandbo.local.postgres import start_embedded_postgres, stop_embedded_postgres
    from grandbo.migrations import migrate

    data = tmp_path_factory.mktemp("scale")
    admin = start_embedded_postgres(data)
    migrate(admin)
    owned_as_in_aurora(admin)
    load_log(admin, TENANT, ROWS)
    plant(admin, TENANT, SECRET)
    yield DatabaseUrls(admin=admin, app=admin)
    stop_embedded_postgres(data)


def _app_plan(database: DatabaseUrls, query: str, params: tuple[Any, ...]) -> str:
    from grandbo.storage.connections import app_url_for

    with connect(app_url_for(database.admin)) as app, app.transaction():
        app.execute("SELECT set_config('grandbo.tenant_id', %s, true)", (TENANT,))
        rows = app.execute("EXPLAIN " + query, params).fetchall()
    return "\n".join(str(r[0]) for r in rows)


def test_the_scrubs_search_uses_its_index_only_as_the_owner_runs_it(
    year_of_questions: DatabaseUrls,
) -> None:
    search = (
        "SELECT retrieval_id FROM org_memory_retrieval_spellings"
        " WHERE spelled LIKE %s AND tenant_id = %s"
    )
    as_owner = owner_plan(year_of_questions.admin, TENANT, SPELT)
    assert "Bitmap Index Scan on org_memory_retrieval_spellings_trgm" in as_owner
    # the same search as the application role, under the policy: the index is not used
    as_app = _app_plan(year_of_questions, search, (f"%{SPELT}%", TENANT))
    assert "org_memory_retrieval_spellings_trgm" not in as_app
    # the rewrite reaches the log's rows by their key, an index the policy allows
    rewrite = _app_plan(
        year_of_questions,
        "SELECT topic FROM org_memory_retrievals WHERE tenant_id = %s"
        " AND retrieval_id = ANY(%s::uuid[])",
        (TENANT, ["00000000-0000-0000-0000-000000000001"]),
    )
    assert "Index Scan using org_memory_retrievals_pkey" in rewrite


def test_a_redaction_at_a_million_questions_completes_within_the_deployed_bound(
    year_of_questions: DatabaseUrls,
) -> None:
    done = redact_as_the_application(year_of_questions.admin, TENANT, SECRET)
    receipt = done["receipt"]
    (questions,) = [p for p in receipt.places if p.place == "retrieval log: questions"]
    assert (questions.found, questions.removed, questions.left) == (3, 3, 0)
    with connect(year_of_questions.admin) as admin:
        left = admin.execute(
            "SELECT count(*) FROM org_memory_retrievals WHERE tenant_id = %s"
            " AND (topic ILIKE %s OR topic ILIKE %s)",
            (TENANT, f"%{SECRET[:6]}%", "%\uff3a\uff51\uff17%"),
        ).fetchone()
    assert left == (0,)


def test_the_search_function_refuses_another_scope(year_of_questions: DatabaseUrls) -> None:
    from grandbo.storage.connections import app_url_for

    with connect(app_url_for(year_of_questions.admin)) as app, app.transaction():
        app.execute("SELECT set_config('grandbo.tenant_id', 'someone-else', true)")
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="own scope"):
            app.execute(
                "SELECT * FROM grandbo_log_reach(%s, %s::text[], '{}'::uuid[])",
                (TENANT, [f"%{SPELT}%"]),
            )
