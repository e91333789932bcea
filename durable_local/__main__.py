"""``python -m durable_local`` → the CLI."""

from __future__ import annotations

import sys

from durable_local.cli import main

if __name__ == "__main__":
    sys.exit(main())
