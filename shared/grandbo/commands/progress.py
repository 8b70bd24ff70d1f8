"""Progress of long commands (`eval`, `embed-pending`, `index`, `import`) on a terminal.

tqdm draws on standard error and only when it is a terminal (`disable=None`), so piped
or captured output stays exactly the command's report.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from typing import TypeVar

T = TypeVar("T")


def terminal_progress(description: str, unit: str) -> Callable[[Iterable[T], int], Iterable[T]]:
    """A wrapper for an iterable of `total` items that shows a bar on a terminal."""

    def wrap(items: Iterable[T], total: int) -> Iterable[T]:
        if total == 0:  # nothing to do: no empty bar
            return items
        from tqdm import tqdm

        return tqdm(items, total=total, desc=description, unit=unit, file=sys.stderr, disable=None)

    return wrap
