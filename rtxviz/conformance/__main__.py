"""``python -m rtxviz.conformance FILE...``: see `rtxviz.conformance.cli`."""

import sys

from .cli import main

sys.exit(main())
