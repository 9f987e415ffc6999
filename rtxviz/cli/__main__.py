"""``python -m rtxviz.cli ...``: the `rtxviz` command."""

import sys

from . import main

sys.exit(main())
