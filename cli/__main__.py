"""``python -m sweepq.cli``: the same as ``sweepq``."""

import sys

from sweepq.cli import main

sys.exit(main())
