"""``python -m ops``: the same entry point as the ``mangaassist-ops`` script."""

import sys

from ops.cli import main

if __name__ == "__main__":
    sys.exit(main())
