"""``python -m opsmith check MODULE:NAME``: see opsmith/cli.py."""

import sys

from .cli import main

sys.exit(main())
