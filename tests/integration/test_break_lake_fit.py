"""The hourly confidence fit reaches every organization (issue 50, point 3): one whose
lake gives a fit that is not kept (too large to skip, too uniform to separate its own
questions) is measured, said so, and not measured again at every run ahead of the
others, which would then never be reached."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from grandbo.memory.lifecycle.confidence_fit import REFIT_AFTER_S, fit_due
from grandbo.memory.service import MemoryService

from .helpers import context, entry
from .lake_corpus import lake


def _load(service: MemoryService, tenant: str, entries: list[dict[str, Any]]) -> None:
    for item in entries:
        service.record_entry(tenant, item, context())
    service.embed_pending(tenant)


def _uniform(n: int) -> list[dict[str, Any]]:
    """n lessons in the same words: no question finds its own entry before the others."""
    return [
        entry(
            "Checkout requests time out waiting for a database connection",
            "Checkout requests time out waiting for a database connection from the pool. "
            "Fixed by returning connections.",
        )
        for _ in range(n)
    ]


def _one_fit_per_run(per_fit_s: float = 120.0) -> Callable[[], float]:
    """An index job run with room for one fit: a fit takes about all of what is left."""
    left = [per_fit_s]

    def time_left() -> float:
        now, left[0] = left[0], 0.0
        return now

    return time_left


def test_an_organization_whose_fit_is_not_kept_does_not_starve_the_next(
    service: MemoryService,
) -> None:
    # Given two organizations first in the job's order: the first's lake (60 lessons in
    # the same words) gives a fit that is not kept, the second's a fit that is
    suffix = uuid.uuid4().hex[:10]
    uniform, varied = f"0a-{suffix}", f"0b-{suffix}"
    _load(service, uniform, _uniform(60))
    _load(service, varied, lake())

    # When the hourly job runs twice, each run with room for one fit
    started = time.monotonic()
    runs = [fit_due(service, time_left_s=_one_fit_per_run()) for _ in range(2)]

    # Then the first run measures the uniform lake and says why it is not kept, and the
    # second reaches the other organization (the uniform one is not due again at once)
    assert "not kept" in runs[0][uniform] or "too few" in runs[0][uniform], runs[0][uniform]
    assert runs[0][varied].startswith("not reached")
    revisions = {t: service.serving_provider(t).embed_rev for t in (uniform, varied)}
    assert uniform not in service.repository.confidence_fits_due(revisions, REFIT_AFTER_S), (
        "an organization whose fit was not kept is due again at the next run"
    )
    assert not runs[1][varied].startswith("not reached"), (runs, time.monotonic() - started)
