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
        from grandbo.errors import interrupted  # here: nothing imported before the try

        if interrupted(exc):
            return 130
        raise


if __name__ == "__main__":
    sys.exit(main())
