"""`rtxviz users add NAME [--teacher]` and `rtxviz users list`: the accounts of a class server.

`add` makes a new token (32 random bytes, URL-safe), prints it once on stdout (so that a script can take it:
``TOKEN=$(rtxviz users add ada --db ...)``) and stores only its hash (`rtxviz.store.hash_token`): a lost token
cannot be shown again, only replaced by a new user. A student passes it to ``rtxviz.watch(url, token=...)`` and
to the page (``?token=``); the student's token posts and reads only the student's runs, a teacher's reads all.

>>> from rtxviz.cli import build_parser
>>> args = build_parser().parse_args(["users", "add", "ada", "--teacher", "--db", "class.db"])
>>> (args.users_command, args.name, args.teacher, args.db)
('add', 'ada', True, 'class.db')
>>> user_name("")
Traceback (most recent call last):
...
argparse.ArgumentTypeError: a user name is 1-64 letters, digits, '.', '_' or '-', got ''
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import sys
import time

from ..store import RunStore, StoreError, UserExists, default_db_path, hash_token, open_store
from ..store.pgurl import redact
from .registry import command, database, fail

#: What a user name may be (the store checks the same): it appears in run lists, URLs and shell scripts.
USER_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def user_name(text: str) -> str:
    """argparse type for NAME: 1-64 characters of ``[A-Za-z0-9_.-]``.

    >>> user_name("bob_2")
    'bob_2'
    """
    if not USER_NAME.fullmatch(text):
        raise argparse.ArgumentTypeError(f"a user name is 1-64 letters, digits, '.', '_' or '-', got {text!r:.80}")
    return text


def _db_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", type=database, default=None, metavar="URL",
                   help="the server's database: a SQLite file or postgresql://user@host/db (default $RTXVIZ_DB "
                        "or ~/.rtxviz/runs.db)")


def _users_args(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="users_command", metavar="{add,list}")
    add = sub.add_parser("add", help="add a user and print their new token (once)",
                         description="Add a user and print their new token once on stdout; only its hash is kept.")
    add.add_argument("name", type=user_name, metavar="NAME", help="1-64 letters, digits, '.', '_' or '-'")
    add.add_argument("--teacher", action="store_true", help="a teacher reads every student's runs")
    add.add_argument("--create", action="store_true",
                     help="make the SQLite file when it does not exist yet (a PostgreSQL database is made with "
                          "createdb; its tables are made on first use)")
    _db_arg(add)
    lst = sub.add_parser("list", help="list the users (names, roles, when added; never tokens)",
                         description="List the users: name, role, when added (tokens are not kept).")
    _db_arg(lst)


def _is_url(db: str) -> bool:
    return "://" in db


def _missing_file(db: str) -> str | None:
    """Why a SQLite --db cannot be used for accounts (None when it can): a typo must not make an empty database
    that the server then never reads."""
    if _is_url(db) or db == ":memory:" or os.path.isfile(db):
        return None
    return (f"no database at {db}: check the path (the server's --db), or add --create to make a new one there "
            "(`rtxviz serve --db` makes it too)")


def _open(db: str, read_only: bool) -> RunStore:
    return open_store(db, read_only=read_only)


def add_user(db: str, name: str, teacher: bool = False, create: bool = False) -> str:
    """Add user `name` to the database `db` and return their new token (only its hash is stored). Raises
    `UserExists`, `StoreError` (the database cannot be opened or written), FileNotFoundError (no such SQLite file
    and not `create`), ValueError (a bad name).

    >>> import tempfile, pathlib
    >>> db = str(pathlib.Path(tempfile.mkdtemp()) / "class.db")
    >>> token = add_user(db, "ada", create=True)
    >>> len(token) >= 43, token in pathlib.Path(db).read_bytes().decode("latin-1")
    (True, False)
    """
    if not USER_NAME.fullmatch(name):
        raise ValueError(f"a user name is 1-64 letters, digits, '.', '_' or '-', got {name!r:.80}")
    if not create:
        missing = _missing_file(db)
        if missing:
            raise FileNotFoundError(missing)
    token = secrets.token_urlsafe(32)
    store = _open(db, read_only=False)
    try:
        store.add_user(name, hash_token(token), teacher=teacher)
    finally:
        store.close()
    return token


def _add(args: argparse.Namespace) -> int:
    db = args.db or default_db_path()
    try:
        token = add_user(db, args.name, teacher=args.teacher, create=args.create)
    except UserExists:
        shown = redact(db) if db.startswith(("postgresql://", "postgres://")) else db  # never the password
        return fail("users", f"there is already a user named {args.name!r} in {shown}: pick another name (a lost "
                             "token cannot be shown again; add the student under a new name)")
    except (StoreError, FileNotFoundError, ValueError) as exc:
        return fail("users", exc)
    role = "teacher" if args.teacher else "student"
    print(token, flush=True)
    print(f"rtxviz users: added {role} {args.name!r}; the token above is shown once (only its hash is kept). "
          f"Give it to {args.name}: rtxviz.watch(url, token=...) to stream, the page's ?token=... to watch",
          file=sys.stderr)
    return 0


def _list(args: argparse.Namespace) -> int:
    db = args.db or default_db_path()
    missing = _missing_file(db)
    if missing:
        return fail("users", missing.replace(", or add --create to make a new one there", ""))
    try:
        store = _open(db, read_only=not _is_url(db))
        try:
            users = store.list_users()
        finally:
            store.close()
    except StoreError as exc:
        return fail("users", exc)
    if not users:
        print(f"no users in {db} (add one with: rtxviz users add NAME --db {db})", file=sys.stderr)
        return 0
    width = max(len(str(u["name"])) for u in users)
    for u in users:
        added = time.strftime("%Y-%m-%d %H:%M", time.localtime(float(u["created"])))
        print(f"{u['name']:<{width}}  {'teacher' if u['teacher'] else 'student'}  {added}")
    return 0


@command("users", "add or list the accounts of a class server (one token per student)", _users_args)
def users(args: argparse.Namespace) -> int:
    if args.users_command == "add":
        return _add(args)
    if args.users_command == "list":
        return _list(args)
    return fail("users", "say what to do: rtxviz users add NAME [--teacher] --db URL, or rtxviz users list --db URL",
                code=2)
