"""A throwaway PostgreSQL server for the tests: Debian's `postgresql` binaries (initdb, pg_ctl), a data directory
in a temporary folder, a free loopback port, trust authentication; one server per test process, stopped at exit.

`database()` gives each test a database of its own (``CREATE DATABASE`` is a file copy of ``template0`` taking
milliseconds), so the tests of one process share a server but never a table or a LISTEN channel.

As root the server runs as the ``postgres`` user (PostgreSQL refuses to run as root). Without the binaries
`available()` says why, and the tests that need the server skip, unless RTXVIZ_REQUIRE_POSTGRES=1 (``make
test``), where they fail instead.
"""

from __future__ import annotations

import atexit
import glob
import itertools
import os
import shutil
import socket
import subprocess
import tempfile
import threading

REQUIRED = os.environ.get("RTXVIZ_REQUIRE_POSTGRES") == "1"


def _bin_dir() -> str | None:
    """The folder of initdb and pg_ctl: Debian keeps them under /usr/lib/postgresql/<major>/bin, off PATH."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if found:
        return os.path.dirname(found[-1])
    initdb = shutil.which("initdb")
    return os.path.dirname(initdb) if initdb else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PgServer:
    """One running PostgreSQL: `url(db)` names a database on it; `stop()` ends it and removes its files."""

    def __init__(self, bin_dir: str, durable: bool = False) -> None:
        self.bin_dir = bin_dir
        self.folder = tempfile.mkdtemp(prefix="rtxviz-pg-")
        self.data = os.path.join(self.folder, "data")
        self.port = _free_port()
        self._as: list[str] = []
        if os.geteuid() == 0:  # PostgreSQL will not run as root: run it as the postgres user
            self._as = ["runuser", "-u", "postgres", "--"]
            shutil.chown(self.folder, "postgres")
        self._run("initdb", "-D", self.data, "-U", "rtxviz", "-A", "trust", "-E", "UTF8", "--no-sync",
                  "--locale=C")
        # fsync off: the tests kill workers, never the database server, so its durability is not what they test
        # (`durable`, for benchmarks: PostgreSQL's defaults, every commit flushed)
        fast = "" if durable else "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 {fast}-c max_connections=200"
        self._run("pg_ctl", "-D", self.data, "-o", options, "-l", os.path.join(self.folder, "log"), "-w",
                  "-t", "60", "start")
        self._names = itertools.count()
        self._lock = threading.Lock()

    def _run(self, tool: str, *args: str) -> None:
        out = subprocess.run([*self._as, os.path.join(self.bin_dir, tool), *args], capture_output=True, text=True,
                             timeout=120)
        if out.returncode != 0:
            raise RuntimeError(f"{tool} failed ({out.returncode}): {out.stderr.strip() or out.stdout.strip()}")

    def url(self, db: str = "postgres") -> str:
        return f"postgresql://rtxviz@127.0.0.1:{self.port}/{db}"

    def database(self) -> str:
        """The URL of a new, empty database."""
        import psycopg

        with self._lock:
            name = f"t{os.getpid()}_{next(self._names)}"
        with psycopg.connect(self.url(), autocommit=True) as con:
            con.execute(f"CREATE DATABASE {name} TEMPLATE template0 STRATEGY FILE_COPY")
        return self.url(name)

    def stop(self) -> None:
        if os.path.isdir(self.data):
            try:
                self._run("pg_ctl", "-D", self.data, "-m", "immediate", "-w", "stop")
            except (RuntimeError, subprocess.TimeoutExpired):
                pass
        shutil.rmtree(self.folder, ignore_errors=True)


_server: PgServer | None = None
_why_not: str | None = None
_start_lock = threading.Lock()


def server() -> PgServer | None:
    """The process's server, started on first use (None when it cannot be: `why_not()` says why)."""
    global _server, _why_not
    with _start_lock:
        if _server is None and _why_not is None:
            try:
                import psycopg  # noqa: F401
            except ImportError:
                _why_not = "psycopg is not installed (pip install -e '.[postgres]')"
                return None
            bin_dir = _bin_dir()
            if bin_dir is None:
                _why_not = "PostgreSQL is not installed (scripts/system-deps.sh postgresql installs it)"
                return None
            try:
                _server = PgServer(bin_dir)
            except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
                _why_not = f"PostgreSQL did not start: {exc}"
                return None
            atexit.register(_server.stop)
        return _server


def why_not() -> str:
    return _why_not or "PostgreSQL is not available"
