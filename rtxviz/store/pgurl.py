"""PostgreSQL URLs as messages show them (no driver needed: the CLI uses these before any database is opened).

>>> redact("postgresql://ada:s3cret@db.example:5433/class?sslmode=require&password=x")
'postgresql://ada@db.example:5433/class?sslmode=require'
>>> where("postgresql://ada@db.example/class")
'PostgreSQL at db.example:5432, database class'
"""

from __future__ import annotations

import urllib.parse


def redact(url: str) -> str:
    """The URL without its password (in the user part or the query): what messages and `path` show."""
    parts = urllib.parse.urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        user, host = netloc.rsplit("@", 1)
        netloc = f"{user.split(':', 1)[0]}@{host}"
    query = urllib.parse.urlencode([(k, v) for k, v in urllib.parse.parse_qsl(parts.query) if k != "password"])
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def where(url: str) -> str:
    """'host:port, database db' for messages."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or "localhost (its Unix socket)"
    db = parts.path.lstrip("/") or parts.username or "(the user's name)"
    return f"PostgreSQL at {host}:{parts.port or 5432}, database {db}"
