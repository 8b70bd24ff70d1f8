"""The `grandbo` command's entry point: the CLI is imported inside it, so a Ctrl-C while
it loads (a second or more on a cold cache) ends the command with 130 and no traceback,
as one while it runs does (`grandbo.cli.main`)."""

from __future__ import annotations

import sys


def main() -> int:
    try:
        from grandbo.cli import main as run

        return run()
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a Ctrl-C inside an import surfaces as its error (pydantic's)
        if _interrupted(exc):
            return 130
        raise


def _interrupted(exc: BaseException) -> bool:
    """Whether a KeyboardInterrupt is among `exc`'s causes or contexts."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, KeyboardInterrupt):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


if __name__ == "__main__":
    sys.exit(main())
