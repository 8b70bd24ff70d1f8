"""The review page's lists: their totals, a page of each, grouped by service."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

REVIEW_PAGE = 25
MAX_BULK = 100


@dataclass(frozen=True, slots=True)
class ReviewList:
    """One section's items: how many in all, which page, and that page by service."""

    total: int
    page: int
    pages: int
    first: int  # the 1-based position of the page's first item (0: none)
    last: int
    groups: list[tuple[str, list[dict[str, Any]]]]


def review_list(items: list[dict[str, Any]], page: int, service_of: Any) -> ReviewList:
    """Page `page` (from 1; past the end: the last) of `items`, its items grouped by the
    service `service_of(item)` names (none: "no service"), groups in order of first item."""
    pages = max(1, -(-len(items) // REVIEW_PAGE))
    page = min(max(1, page), pages)
    start = (page - 1) * REVIEW_PAGE
    shown = items[start : start + REVIEW_PAGE]
    groups: dict[str, list[dict[str, Any]]] = {}
    for item in shown:
        groups.setdefault(service_of(item) or "no service", []).append(item)
    return ReviewList(
        total=len(items),
        page=page,
        pages=pages,
        first=start + 1 if shown else 0,
        last=start + len(shown),
        groups=list(groups.items()),
    )
