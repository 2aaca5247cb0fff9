"""``python -m sweepq``: the same as the ``sweepq`` command (sweepq.cli).

pyproject.toml maps the ``sweepq`` package to the repository root so that this one file is
its ``__main__``; every layer is a subpackage in a folder of its own (docs/design.md).
"""

import sys

from sweepq.cli import main

if __name__ == "__main__":
    sys.exit(main())
