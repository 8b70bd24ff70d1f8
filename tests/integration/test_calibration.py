"""The cutoff from a tenant's own lake (issue 13, item 3): on a synthetic lake whose titles
sit 0.1-0.3 from their own entries and 1.0 from every other, the calibrated cutoff is the
middle of the gap (0.65), kept per tenant and model, and used by the tenant's queries."""

from __future__ import annotations

import math

import pytest

from grandbo.embedding.base import render_entry_text
from grandbo.embedding.fake import FakeEmbeddingProvider
from grandbo.errors import InvalidInputError
from grandbo.memory.repository import MemoryRepository
from grandbo.memory.service import MemoryService
from grandbo.memory.vectors.cutoff import separating_cutoff

from .helpers import context, direction, entry

WORDS = [
    "checkout", "payments", "ledger", "search", "billing", "catalog", "inventory", "shipping",
    "identity", "gateway", "pricing", "reviews", "wishlist", "coupons", "returns", "invoices",
    "tax", "fraud", "loyalty", "orders", "carts", "sessions", "feeds", "media", "alerts",
    "reports", "exports", "imports", "quotas", "tokens",
]  # fmt: skip
N = len(WORDS)


def synthetic_lake() -> tuple[FakeEmbeddingProvider, list[dict[str, str]]]:
    """Entry i's vector is axis i; its title is at distance 0.1-0.3 from it (towards axis
    500 + i), so at distance 1.0 from every other entry's vector."""
    pinned: dict[str, list[float]] = {}
    entries = []
    for i, word in enumerate(WORDS):
        title = f"The {word} service stopped answering"
        summary = (
            f"The {word} service stopped answering because its {word} database ran out of "
            f"connections during incident {i}; raising the {word} pool size fixed it."
        )
        own = 0.1 + 0.2 * i / (N - 1)  # distances 0.1 .. 0.3
        pinned[render_entry_text(title, summary, None)] = direction((i, 1.0))
        pinned[title] = direction((i, 1 - own), (500 + i, math.sqrt(1 - (1 - own) ** 2)))
        entries.append(entry(title, summary))
    return FakeEmbeddingProvider(pinned=pinned), entries


def test_the_calibrated_cutoff_is_the_middle_of_the_gap_and_queries_use_it(
    repository: MemoryRepository, tenant: str, other_tenant: str
) -> None:
    provider, entries = synthetic_lake()
    service = MemoryService(repository, provider)
    for item in entries:
        service.record_entry(tenant, item, context())
    service.embed_pending(tenant)
    assert service.query_org_memory(tenant, "the checkout service stopped answering")
    before = service.query_org_memory(tenant, "checkout database connections ran out")
    assert before.metadata.vector_cutoff == provider.vector_cutoff  # the model's default

    report = service.calibrate(tenant, sample=N)
    assert report.sample_size == N
    assert report.vector_cutoff == pytest.approx(0.65, abs=0.01)  # (0.3 + 1.0) / 2
    assert report.separation == 1.0
    assert (report.own_p95, report.other_p5) == (pytest.approx(0.29, abs=0.01), 1.0)
    answer = service.query_org_memory(tenant, "checkout database connections ran out")
    assert answer.metadata.vector_cutoff == report.vector_cutoff
    # per tenant: another organization keeps the model's default
    service.record_entry(other_tenant, entries[0], context())
    service.embed_pending(other_tenant)
    other = service.query_org_memory(other_tenant, "checkout database connections ran out")
    assert other.metadata.vector_cutoff == provider.vector_cutoff
    # per model: a tenant served by another model revision is not calibrated for it
    renamed = MemoryService(repository, FakeEmbeddingProvider(model_id="another-model"))
    assert renamed.vector_cutoff(tenant, renamed.provider) == renamed.provider.vector_cutoff


def test_calibrating_needs_enough_entries_and_a_sane_sample(
    repository: MemoryRepository, tenant: str
) -> None:
    provider, entries = synthetic_lake()
    service = MemoryService(repository, provider)
    for item in entries[:5]:
        service.record_entry(tenant, item, context())
    service.embed_pending(tenant)
    with pytest.raises(InvalidInputError, match="has 5 embedded entries"):
        service.calibrate(tenant)
    for bad in (0, 5, 5000, True, "100"):
        with pytest.raises(InvalidInputError, match="sample"):
            service.calibrate(tenant, sample=bad)  # type: ignore[arg-type]


def test_the_separating_cutoff() -> None:
    assert separating_cutoff([0.1, 0.2, 0.3], [0.9, 1.0]) == (0.6, 1.0)
    # overlapping distributions: the best split, not a perfect one
    cutoff, separation = separating_cutoff([0.1, 0.2, 0.5], [0.4, 0.8, 0.9])
    assert cutoff == pytest.approx(0.3)
    assert separation == pytest.approx(2 / 3)


def test_a_lake_whose_titles_say_nothing_is_not_calibrated_and_keeps_the_default(
    repository: MemoryRepository, tenant: str
) -> None:
    # every title the same: its distance to its own entry is its distance to any other
    service = MemoryService(repository, FakeEmbeddingProvider())
    for word in WORDS:
        service.record_entry(
            tenant,
            entry(
                "Deploy rolled back after errors",
                f"The {word} deploy was rolled back after its error rate rose during the "
                f"{word} rollout window; the previous {word} build was restored.",
            ),
            context(),
        )
    service.embed_pending(tenant)
    with pytest.raises(InvalidInputError, match="cannot be calibrated"):
        service.calibrate(tenant)
    assert repository.calibrated_cutoff(tenant, service.provider.embed_rev) is None
    answer = service.query_org_memory(tenant, "the deploy was rolled back after errors rose")
    assert answer.metadata.vector_cutoff == service.provider.vector_cutoff


def test_calibrating_every_organization_names_the_ones_it_cannot_and_goes_on(
    repository: MemoryRepository, tenant: str, other_tenant: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import argparse

    from grandbo.commands.calibrate import cmd_calibrate

    provider, entries = synthetic_lake()
    service = MemoryService(repository, provider)
    service.record_entry(other_tenant, entries[0], context())  # too small to calibrate
    for item in entries:
        service.record_entry(tenant, item, context())
    service.embed_pending()
    known = [tenant, other_tenant]
    repository.tenant_ids = lambda: known  # type: ignore[method-assign]  # these two only
    arguments = argparse.Namespace(tenant=None, sample=N, json=False, cutoff_only=True)
    assert cmd_calibrate(arguments, service) == 0
    out = capsys.readouterr().out
    assert f"{other_tenant}: not calibrated, the model's default stays" in out
    assert f"{tenant}: cutoff 0.65" in out
    assert repository.calibrated_cutoff(tenant, provider.embed_rev) == 0.65


def look_alike_lake() -> tuple[FakeEmbeddingProvider, list[dict[str, str]]]:
    """Issue 24, item 4's lake: entries that all look alike (one cluster: any two entries
    at cosine distance 0.34) whose titles sit within 0.01-0.03 of their own entry, as
    "Deploy NNNN of checkout rolled back" titles do: the separation looks excellent and
    the separating cutoff (~0.18) would empty the vector leg for real topics."""
    pinned: dict[str, list[float]] = {}
    entries = []
    shared = math.sqrt(0.66)  # every entry's share of the cluster's axis: cos = 0.66
    for i, word in enumerate(WORDS):
        title = f"Deploy {4800 + i} of {word} rolled back"
        summary = (
            f"Deploy {4800 + i} of the {word} service was rolled back after its canary "
            f"raised the error rate of {word} requests above the alarm threshold."
        )
        axis = 10 + i
        vector = direction((0, shared), (axis, math.sqrt(1 - shared**2)))
        pinned[render_entry_text(title, summary, None)] = vector
        near = 1 - (0.01 + 0.02 * i / (N - 1))  # title to own entry: 0.01 .. 0.03
        side = math.sqrt(1 - near**2)
        pinned[title] = [near * x for x in vector]
        pinned[title][600 + i] = side
        entries.append(entry(title, summary, kind="episodic"))
    return FakeEmbeddingProvider(pinned=pinned), entries


def test_a_cutoff_outside_the_models_measured_range_is_refused_and_the_one_in_force_stays(
    repository: MemoryRepository, tenant: str
) -> None:
    provider, entries = look_alike_lake()
    service = MemoryService(repository, provider)
    for item in entries:
        service.record_entry(tenant, item, context())
    service.embed_pending(tenant)
    with pytest.raises(
        InvalidInputError, match=r"outside 0\.3-1\.0, the range measured"
    ) as refused:
        service.calibrate(tenant, sample=N)
    assert "the cutoff in force (0.8) stays" in str(refused.value)
    assert repository.calibrated_cutoff(tenant, provider.embed_rev) is None


def test_a_cutoff_that_drops_the_sampled_titles_own_entries_is_refused() -> None:
    from grandbo.memory.vectors.cutoff import MAX_OWN_PAIRS_LOST, implausible_cutoff

    provider = FakeEmbeddingProvider()
    own = [0.2] * 50 + [0.5] * 50  # half the titles sit at 0.5 from their own entry
    assert implausible_cutoff(0.6, own, 0.8, provider) is None
    reason = implausible_cutoff(0.45, own, 0.8, provider)  # keeps 50 % where 0.8 keeps all
    assert reason is not None
    assert "keep 50%" in reason
    assert "keeps 100%" in reason
    # a loss within the tolerance is kept
    near = [0.2] * 95 + [0.5] * 5
    assert implausible_cutoff(0.45, near, 0.8, provider) is None
    assert MAX_OWN_PAIRS_LOST == 0.1
