"""``python -m opsmith check|build MODULE:NAME``: see opsmith/cli.py."""

import sys

from .cli import main

sys.exit(main())
