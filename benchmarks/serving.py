"""Starting `rtxviz serve` for a benchmark: a child process of a given checkout, on a free loopback port.

Shared by bench_events.py, bench_store.py and bench_torch_watch.py (not a benchmark itself).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path

#: This checkout (what a benchmark measures unless told to run another, RTXVIZ_BENCH_ROOT).
ROOT = Path(os.environ.get("RTXVIZ_BENCH_ROOT") or Path(__file__).resolve().parent.parent)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def process_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds the process has used so far (Linux /proc; None elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def root_env(root: Path) -> dict[str, str]:
    """The environment for a child Python that must import rtxviz from the checkout at `root`; run it with
    ``cwd=root`` too: ``python -c`` and ``python -m`` put the current directory first on sys.path, ahead of
    PYTHONPATH, so a child started from this checkout would import this checkout's rtxviz whatever `root` says
    (it did: the "before" of every comparison up to round 5 was in fact this checkout). Checked once per root.

    >>> env = root_env(ROOT)
    >>> env["PYTHONPATH"] == str(ROOT)
    True
    """
    env = {**os.environ, "PYTHONPATH": str(root)}
    if root not in _CHECKED_ROOTS:
        where = subprocess.run([sys.executable, "-c", "import rtxviz; print(rtxviz.__file__)"], env=env, cwd=root,
                               capture_output=True, text=True, check=True).stdout.strip()
        if not Path(where).resolve().is_relative_to(Path(root).resolve()):
            raise RuntimeError(f"a child meant to run the checkout at {root} imports rtxviz from {where}")
        _CHECKED_ROOTS.add(root)
    return env


_CHECKED_ROOTS: set[Path] = set()


@contextlib.contextmanager
def server_process(db: str, root: Path = ROOT, nice: int | None = None, cpu: dict | None = None,
                   args: Sequence[str] = ()) -> Iterator[str]:
    """`rtxviz serve` (of the checkout at `root`) in a child process, as a user starts it (`nice`: its --nice;
    `args`: more of its options, e.g. ``--workers 2``); yields its URL once it answers. `cpu`, when given, receives
    ``cpu_s``: the CPU seconds the server used from when it answered until the block ended (start-up excluded), the
    figure that a loaded machine distorts least; and ``pid``, the server's process id, as soon as it answers (for
    reading its CPU time while it runs, `process_cpu_s`)."""
    port = free_port()
    env = root_env(root)
    extra = [] if nice is None else ["--nice", str(nice)]
    proc = subprocess.Popen([sys.executable, "-m", "rtxviz.cli", "serve", "--port", str(port), "--db", db, *extra,
                             *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=root, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        first = proc.stdout.readline() if proc.stdout is not None else ""
        if "serving on" not in first:
            raise RuntimeError(f"rtxviz serve did not start: {first.strip() or 'no output'}")
        for _ in range(600):  # up to 30 s: a loaded machine, or workers forking
            try:
                urllib.request.urlopen(url + "/api/health", timeout=1).read()
                break
            except OSError:
                time.sleep(0.05)
        cpu0 = process_cpu_s(proc.pid)
        if cpu is not None:
            cpu["pid"] = proc.pid
        yield url
        cpu1 = process_cpu_s(proc.pid)
        if cpu is not None and cpu0 is not None and cpu1 is not None:
            cpu["cpu_s"] = cpu1 - cpu0
    finally:
        proc.terminate()
        proc.wait(30)  # a parent of --workers stops them first
