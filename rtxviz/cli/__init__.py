"""The `rtxviz` command: ``serve``, ``import``, ``export``, ``render`` (one decorated function each).

registry.py holds the registry and the parser (`command`, `build_parser`, `main`); each command, or family of
commands, is one module here that registers itself when imported below: serve.py (``serve``), transfer.py
(``import``, ``export``), render.py (``render``), users.py (``users add``, ``users list``). The console script
is ``rtxviz = "rtxviz.cli:main"``, and
``python -m rtxviz.cli`` runs the same.

>>> main([]) == 2  # doctest: +ELLIPSIS
usage: rtxviz [-h] [--version] COMMAND ...
...
True
>>> list(COMMANDS)
['serve', 'import', 'export', 'render', 'lesson', 'users']
"""

from __future__ import annotations

from .registry import COMMANDS, build_parser, command, fail, main

# Each module registers its commands when imported; this order is the order `rtxviz --help` lists them.
# isort: off
from . import serve  # noqa: F401
from . import transfer  # noqa: F401
from . import render  # noqa: F401
from . import lesson  # noqa: F401
from . import users  # noqa: F401
# isort: on

__all__ = ["COMMANDS", "build_parser", "command", "fail", "main"]
