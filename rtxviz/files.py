"""Output files written whole or not at all: what a command or `render` writes replaces the previous file only once it
is complete (`replacing`). Standard library only, so that any part may use it (the server's commands never load the
engine through it).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import stat
from collections.abc import Iterator


@contextlib.contextmanager
def replacing(path: str) -> Iterator[str]:
    """A temporary path beside `path` to write the output to; it replaces `path` when the block ends without an
    error, and is removed when it raises: a failed write (a full disk) never leaves half a file where the previous
    one was. A symbolic link (/dev/stdout is one) and anything other than a regular file (a pipe) are written in
    place, through the link: replacing them would put a file where the link or the device was.

    >>> import tempfile, pathlib
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "a.txt"
    >>> with replacing(str(out)) as tmp:
    ...     _ = pathlib.Path(tmp).write_text("new")
    >>> out.read_text(), sorted(p.name for p in out.parent.iterdir())
    ('new', ['a.txt'])
    """
    try:
        mode = os.lstat(path).st_mode  # lstat: the link itself, not what it points to
    except FileNotFoundError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):
        yield path
        return
    folder, name = os.path.split(path)
    tmp = os.path.join(folder, f".{name}.{secrets.token_hex(4)}.tmp")
    try:
        yield tmp
        if mode is not None:
            shutil.copymode(path, tmp)  # an export over an earlier one keeps its permissions
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
