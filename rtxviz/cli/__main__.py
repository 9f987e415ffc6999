"""``python -m rtxviz.cli ...``: the `rtxviz` command."""

import sys

from . import main

if __name__ == "__main__":  # importing this module (a doctest collector does) runs nothing
    sys.exit(main())
