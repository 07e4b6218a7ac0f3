"""``python -m serving_app [serve]`` runs the container entrypoint."""

import sys

from serving_app.main import main

if __name__ == "__main__":
    sys.exit(main())
