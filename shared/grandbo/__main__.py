"""`python -m grandbo`: the `grandbo` command."""

import sys

from grandbo.entry import main

sys.exit(main())
