"""Blue/green re-embedding (issue 12, item 10): a model change serves the previous model's
vectors until the new one covers the tenant, then switches in one transaction."""

from __future__ import annotations

from grandbo.embedding.fake import FakeEmbeddingProvider
from grandbo.memory.repository import MemoryRepository
from grandbo.memory.service import MemoryService
from grandbo.memory.vectors.blue_green import SWITCH_COVERAGE
from grandbo.runtime.lambda_container import LambdaEnvironment, LambdaRuntime
from grandbo.storage.connections import DatabaseUrls

from .helpers import context, entry

TOPIC = "the payments database ran out of connections and checkout requests timed out"


def seeded(repository: MemoryRepository, tenant: str, blue: FakeEmbeddingProvider, n: int) -> None:
    old = MemoryService(repository, blue)
    for i in range(n):
        old.record_entry(
            tenant,
            entry(
                f"Payments pool exhausted, case {i}",
                f"Checkout requests timed out waiting for a database connection (case {i}).",
            ),
            context(),
        )
    assert old.embed_pending(tenant) == n


def model_change(
    repository: MemoryRepository, tenant: str, entries: int
) -> tuple[FakeEmbeddingProvider, FakeEmbeddingProvider, MemoryService]:
    """`entries` embedded by the old model (blue), then a service changing to green."""
    blue = FakeEmbeddingProvider(model_id="fake-blue")
    green = FakeEmbeddingProvider(model_id="fake-green")
    seeded(repository, tenant, blue, entries)
    return blue, green, MemoryService(repository, green, previous_provider=blue)


def test_a_model_change_serves_the_previous_model_until_the_new_one_covers_the_tenant(
    repository: MemoryRepository, tenant: str, other_tenant: str
) -> None:
    blue, green, new = model_change(repository, tenant, 50)
    seeded(repository, other_tenant, blue, 3)

    # before a single new vector: every entry still in the vector leg, from the old model
    before = new.query_org_memory(tenant, TOPIC, limit=5)
    assert before.metadata.embed_rev == blue.embed_rev
    assert before.metadata.vector_candidates == 25
    assert before.metadata.active_entries_without_current_vector == 0

    jobs = new.pending_jobs(tenant)
    assert len(jobs) == 50  # each lacks the new model's vector
    blue.calls.clear()
    new.embed_jobs(jobs[:40])  # 80 %: staged, not switched
    assert repository.serving_rev(tenant) is None
    assert blue.calls == []  # nothing was re-embedded with the old model
    assert sum(len(batch) for batch in green.calls) == 40
    repository.rebuild_projection(tenant)  # a rebuild mid-switch keeps what was staged
    assert repository.staged_coverage(tenant, green.embed_rev) == (40, 50)
    midway = new.query_org_memory(tenant, TOPIC, limit=5)
    assert midway.metadata.embed_rev == blue.embed_rev
    assert midway.metadata.vector_candidates == 25

    # written mid-switch: served at once (old model), staged for the new one
    new.record_entry(
        tenant,
        entry(
            "Payments pool exhausted again",
            "Checkout requests timed out waiting on the payments database pool again.",
        ),
        context(),
    )
    new.embed_pending(tenant)
    assert repository.serving_rev(tenant) == green.embed_rev
    after = new.query_org_memory(tenant, TOPIC, limit=5)
    assert after.metadata.embed_rev == green.embed_rev
    assert after.metadata.vector_candidates == 25
    assert after.metadata.active_entries_without_current_vector == 0
    assert new.pending_jobs(tenant) == []
    assert repository.staged_coverage(tenant, green.embed_rev) == (0, 51)  # staging emptied
    assert repository.verify_projection(tenant).mismatches == []

    # the other organization switches on its own, not with this one
    assert repository.serving_rev(other_tenant) is None
    assert new.query_org_memory(other_tenant, TOPIC).metadata.embed_rev == blue.embed_rev


def test_the_switch_threshold_leaves_the_uncovered_few_to_the_sweeper(
    repository: MemoryRepository, tenant: str
) -> None:
    _blue, green, new = model_change(repository, tenant, 50)
    jobs = new.pending_jobs(tenant)
    covered = int(50 * SWITCH_COVERAGE)  # 49 of 50
    new.embed_jobs(jobs[: covered - 1])
    assert repository.serving_rev(tenant) is None
    new.embed_jobs(jobs[covered - 1 : covered])
    assert repository.serving_rev(tenant) == green.embed_rev
    # the one left behind lost its old vector and is pending for the new model
    (pending,) = new.pending_jobs(tenant)
    assert pending.entry_id == jobs[-1].entry_id
    assert new.query_org_memory(tenant, TOPIC).metadata.active_entries_without_current_vector == 1
    new.embed_jobs([pending])
    assert new.pending_jobs(tenant) == []


def test_without_a_previous_model_nothing_is_staged(
    repository: MemoryRepository, tenant: str
) -> None:
    blue = FakeEmbeddingProvider(model_id="fake-blue")
    green = FakeEmbeddingProvider(model_id="fake-green")
    seeded(repository, tenant, blue, 3)
    cold = MemoryService(repository, green)  # the old behaviour: re-embed in place
    assert cold.query_org_memory(tenant, TOPIC).metadata.vector_candidates == 0
    cold.embed_pending(tenant)
    assert repository.staged_coverage(tenant, green.embed_rev) == (0, 3)
    assert cold.query_org_memory(tenant, TOPIC).metadata.vector_candidates == 3


def test_the_lambda_runtime_reads_the_previous_model_from_its_environment(
    database: DatabaseUrls,
) -> None:
    runtime = LambdaRuntime(
        LambdaEnvironment.model_validate(
            {
                "DATABASE_URL": database.app,
                "GRANDBO_EMBEDDING_PROVIDER": "fake",
                "GRANDBO_PREVIOUS_EMBEDDING_PROVIDER": "fake",
            }
        ),
        provider=FakeEmbeddingProvider(model_id="fake-green"),
    )
    try:
        service = runtime.service()
        assert service.previous_provider is not None
        assert service.previous_provider.embed_rev == FakeEmbeddingProvider().embed_rev
        assert service.provider.embed_rev != service.previous_provider.embed_rev
    finally:
        runtime.close()


def test_retiring_the_last_uncovered_entries_switches_at_the_next_sweep(
    repository: MemoryRepository, tenant: str, other_tenant: str
) -> None:
    blue, green, new = model_change(repository, tenant, 10)
    jobs = new.pending_jobs(tenant)
    new.embed_jobs(jobs[:7])
    for job in jobs[7:]:
        new.retire_entry(tenant, job.entry_id, "obsolete", context())
    assert repository.serving_rev(tenant) is None
    assert list(new.pending_job_pages(tenant, claim_for_s=0)) == []  # the sweep switches it
    assert repository.serving_rev(tenant) == green.embed_rev
    # an organization with no active entry is covered too
    MemoryService(repository, blue).record_entry(
        other_tenant,
        entry(
            "Lone lesson",
            "What was learned once, then retired: the cache warmed too slowly after a deploy.",
        ),
        context(),
    )
    (lone,) = {job.entry_id for job in new.pending_jobs(other_tenant)}  # blue now, green staged
    new.retire_entry(other_tenant, lone, "obsolete", context())
    new.pending_jobs(other_tenant)
    assert repository.serving_rev(other_tenant) == green.embed_rev


def test_a_worker_that_read_the_tenant_before_its_switch_never_undoes_it(
    repository: MemoryRepository, tenant: str
) -> None:
    blue, green, new = model_change(repository, tenant, 5)
    new.embed_pending(tenant)
    assert repository.serving_rev(tenant) == green.embed_rev
    assert new.pending_jobs(tenant) == []
    target = new.query_org_memory(tenant, TOPIC).hits[0].entry_id
    # the late worker's writes: a blue vector and a green staging, as of before the switch
    late = [(target, 1, blue.embed_one("late"))]
    assert repository.store_embeddings(tenant, blue.embed_rev, late, while_serving=True) == 0
    assert repository.stage_vectors(tenant, green.embed_rev, late) == 0
    assert repository.staged_coverage(tenant, green.embed_rev) == (0, 5)
    assert new.get_entry(tenant, target).embed_rev == green.embed_rev
    # and a second switch of the same tenant does nothing
    assert repository.switch_serving(tenant, green.embed_rev, 0) is None


def test_a_query_that_races_the_switch_searches_the_new_vectors(
    repository: MemoryRepository, tenant: str
) -> None:
    _blue, green, new = model_change(repository, tenant, 5)
    new.embed_jobs(new.pending_jobs(tenant)[:4])  # 80 %: not switched yet

    class SwitchingWhileEmbedding(FakeEmbeddingProvider):
        def embed_one(self, text: str) -> list[float]:
            vector = super().embed_one(text)
            new.embed_pending(tenant)  # another worker finishes the tenant meanwhile
            return vector

    racing = MemoryService(
        repository, green, previous_provider=SwitchingWhileEmbedding(model_id="fake-blue")
    )
    answer = racing.query_org_memory(tenant, TOPIC)
    assert repository.serving_rev(tenant) == green.embed_rev
    assert answer.metadata.embed_rev == green.embed_rev
    assert answer.metadata.vector_candidates == 5
