"""Where in the user's code something happened: the innermost frame outside the rtxviz package.

Walking frames materialises them (about a microsecond), so nothing on the hot path calls this: in-place writes
(rare) record their site, and `detect_anomaly` records every node's.

>>> site = user_site()
>>> site is not None and site.lineno > 0
True
"""

from __future__ import annotations

import linecache
import os
import sys
from dataclasses import dataclass
from types import FrameType

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # rtxviz/


@dataclass(frozen=True)
class Site:
    """Where a node was created in user code."""

    filename: str
    lineno: int
    function: str

    @property
    def line(self) -> str:
        return linecache.getline(self.filename, self.lineno).strip()

    @property
    def short(self) -> str:
        """``file.py:12 (in train)``: for one-line messages."""
        return f"{self.filename}:{self.lineno} (in {self.function})"

    def __str__(self) -> str:
        text = f'File "{self.filename}", line {self.lineno}, in {self.function}'
        code = self.line
        return text + (f"\n    {code}" if code else "")


def user_site(skip: int = 1) -> Site | None:
    """The innermost frame outside the rtxviz package (cheap: walks frames, reads no source)."""
    f: FrameType | None = sys._getframe(skip)
    while f is not None and f.f_code.co_filename.startswith(_PKG_DIR):
        f = f.f_back
    if f is None:
        return None
    return Site(f.f_code.co_filename, f.f_lineno, f.f_code.co_name)
