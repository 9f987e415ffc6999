"""`rtxviz serve --workers N`: N server processes accepting on one listening socket, no proxy in front.

The parent binds the socket, then forks N workers that inherit it: each runs its own event loop, its own app and
its own store (opened after the fork: a connection pool's threads do not survive one), and accepts on the shared
socket itself; the kernel hands each new connection to one of the processes waiting on it. Viewers see every
worker's events through the store's notifications (PostgreSQL LISTEN/NOTIFY, rtxviz/store/postgres.py).

The parent only supervises: a worker that dies (a crash, kill -9) is started again, and the others go on
serving meanwhile (the socket's queue of waiting connections is shared, so nothing queued is lost with the
worker); SIGTERM or SIGINT stops every worker (each finishes its requests: uvicorn's graceful shutdown) and then
the parent. POSIX only (fork).
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from typing import Any

#: A worker that dies within this many seconds of starting is not started again (a broken configuration would
#: otherwise restart forever).
QUICK_DEATH_S = 2.0


def _worker(sock: socket.socket, make_app: Callable[[], Any], make_config: Callable[[Any], Any]) -> int:
    """The body of one worker process: build the app here, serve on the inherited socket."""
    import uvicorn

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)  # uvicorn installs its own; nothing of the parent's stays
    try:
        app = make_app()
    except Exception as exc:  # say it, and let the parent decide
        print(f"rtxviz serve: worker {os.getpid()}: {exc}", file=sys.stderr, flush=True)
        return 1
    uvicorn.Server(make_config(app)).run(sockets=[sock])
    return 0


def _fork(sock: socket.socket, make_app: Callable[[], Any], make_config: Callable[[Any], Any]) -> int:
    pid = os.fork()
    if pid == 0:  # the child never returns into the parent's code
        code = 1
        try:
            code = _worker(sock, make_app, make_config)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    return pid


def run_workers(sock: socket.socket, n: int, make_app: Callable[[], Any], make_config: Callable[[Any], Any]) -> int:
    """Run `n` workers on `sock` until SIGTERM/SIGINT; returns the exit code for `rtxviz serve`."""
    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    started: dict[int, float] = {}
    for _ in range(n):
        started[_fork(sock, make_app, make_config)] = time.monotonic()
    code = 0
    while started:
        if stopping:
            for pid in started:
                _signal(pid, signal.SIGTERM)
            break
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            time.sleep(0.1)
            continue
        since = started.pop(pid, None)
        if since is None:
            continue
        how = (f"killed by signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status)
               else f"exited with {os.WEXITSTATUS(status)}")
        if time.monotonic() - since < QUICK_DEATH_S and not os.WIFSIGNALED(status):
            print(f"rtxviz serve: worker {pid} {how} right after starting; not starting it again",
                  file=sys.stderr, flush=True)
            code = 1
            if not started:
                break
            continue
        print(f"rtxviz serve: worker {pid} {how}; starting another (the other workers kept serving)",
              file=sys.stderr, flush=True)
        started[_fork(sock, make_app, make_config)] = time.monotonic()
    deadline = time.monotonic() + 30
    for pid in list(started):
        while time.monotonic() < deadline:
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                break
            if done:
                break
            time.sleep(0.05)
        else:
            _signal(pid, signal.SIGKILL)
    sock.close()
    return code


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass
