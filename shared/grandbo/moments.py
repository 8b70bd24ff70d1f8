"""One plausible range for every moment an event records.

An incident's `closed_at`, an imported event's `recorded_at` and the incident moment its
payload carries, a topology change's `valid_at`: each becomes part of what memory and the
learned graph say was true when. A moment before `EARLIEST_MOMENT` (year 1, a platform's
zero date) would make a learned node valid since antiquity, so every `as_of` replay
would include it; one far ahead is no moment yet. Both ends are refused; one at most
`CLOCK_SKEW` ahead of our clock is another clock's now, and read as ours.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

# Before any incident tooling this service reads from (and before its own first event)
EARLIEST_MOMENT = datetime(2000, 1, 1, tzinfo=UTC)
# How far another system's clock may run ahead of ours before its moment is refused
CLOCK_SKEW = timedelta(days=1)


def in_utc(value: datetime) -> datetime:
    """`value` in UTC (a moment without a zone is read as UTC); ValueError if UTC cannot
    hold it (0001-01-01T00:00:00+14:00 is before year 1 there)."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError("is out of the range of dates") from None


def plausible_moment(value: datetime, now: datetime) -> datetime:
    """`value` in UTC if it lies between EARLIEST_MOMENT and `now` + CLOCK_SKEW, else
    ValueError saying which end it passed. A moment up to the skew ahead is kept as it
    is; callers that must not record the future take min(moment, now)."""
    moment = in_utc(value)
    if moment < EARLIEST_MOMENT:
        raise ValueError(
            f"is before {EARLIEST_MOMENT.date().isoformat()}: not a moment an incident "
            "or a memory entry can have"
        )
    if moment > now + CLOCK_SKEW:
        raise ValueError(
            f"is more than {CLOCK_SKEW.days} day ahead of now ({now.isoformat()}): a clock "
            "is wrong, or the date is"
        )
    return moment
