"""Accounts on a class server (issue 20): the admin token is the teacher's, `rtxviz users add` makes the others; a
student's token posts and reads only the student's runs, on every route, REST and WebSocket; teachers read all.

Each rule is checked from both sides: what the owner (or a teacher) gets, and what another student gets for the
same route, which must read exactly as for a run that does not exist.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from rtxviz.cli import main
from rtxviz.cli.users import add_user
from rtxviz.store import hash_token, open_store
from rtxviz.web import create_app
from rtxviz.web.app import AccountsNeedToken
from rtxviz.web.routers.ws import NO_SUCH_RUN

ADMIN = "the-teachers-admin-token"
NDJSON = {"Content-Type": "application/x-ndjson"}


def ev(kind: str = "step_begin", step: int | None = 0, **fields: Any) -> dict[str, Any]:
    return {"v": 1, "kind": kind, "t": 1.0, "step": step, **fields}


def node(i: int, step: int = 0) -> dict[str, Any]:
    return ev("node", step, id=i, op="mul", inputs=[{"leaf": 1}], shape=[2], dtype="float32", device="cpu")


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def post(c: TestClient, run_id: str, events: list[dict[str, Any]], token: str) -> Any:
    body = "\n".join(json.dumps(e) for e in events)
    return c.post(f"/api/runs/{run_id}/events", content=body, headers={**NDJSON, **auth(token)})


def backend(request: pytest.FixtureRequest) -> str:
    """The store this test runs on: tests/web/conftest.py's `store_backend` ("sqlite" or "postgres")."""
    try:
        return str(request.getfixturevalue("store_backend"))
    except pytest.FixtureLookupError:
        return "sqlite"


@pytest.fixture
def new_db(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """Makes an empty database for the current store: a SQLite path, or the URL of a new PostgreSQL database
    (the CLI and the tests open it themselves, so the path substitution of conftest.py must not be relied on)."""
    names = iter(range(100))

    def make() -> str:
        if backend(request) == "postgres":
            from tests.store import pgserver

            server = pgserver.server()
            assert server is not None
            return server.database()
        return str(tmp_path / f"class{next(names)}.db")

    return make


def table_values(db: str) -> list[str]:
    """Every value of every table of the database, as text."""
    values: list[str] = []
    if db.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(db) as con:
            tables = [t for (t,) in con.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")]
            for table in tables:
                for row in con.execute(f'SELECT * FROM "{table}"'):
                    values.extend(str(v) for v in row)
        return values
    with sqlite3.connect(db) as con:
        for (table,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'"):
            for row in con.execute(f'SELECT * FROM "{table}"'):
                values.extend(str(v) for v in row)
    return values


@pytest.fixture
def klass(new_db: Any) -> dict[str, Any]:
    """A class database: students ada and bob, teacher tess (one store opened for the three: the CLI's add_user,
    tested below, opens one per user)."""
    db = new_db()
    tokens = {name: f"{name}-token-{i}-abcdefghijklmnopqrstuvwxyz0123456789" for i, name in
              enumerate(("ada", "bob", "tess"))}
    store = open_store(db)
    try:
        for name, token in tokens.items():
            store.add_user(name, hash_token(token), teacher=(name == "tess"))
    finally:
        store.close()
    return {"db": db, "tokens": tokens}


@pytest.fixture
def client(klass: dict[str, Any]) -> Any:
    with TestClient(create_app(db=klass["db"], token=ADMIN)) as c:
        t = klass["tokens"]
        assert post(c, "a1", [ev("run_start", None, name="ada's mlp"), ev(), node(1)], t["ada"]).status_code == 200
        assert post(c, "b1", [ev("run_start", None, name="bob's mlp"), ev(), node(1), node(2)],
                    t["bob"]).status_code == 200
        c.tokens = t  # type: ignore[attr-defined]
        yield c


def ids(c: TestClient, token: str) -> dict[str, Any]:
    r = c.get("/api/runs", headers=auth(token))
    assert r.status_code == 200, r.text
    return {run["id"]: run["owner"] for run in r.json()}


def test_a_new_run_is_owned_by_the_student_who_posts_it_and_listed_only_to_them_and_teachers(client):
    t = client.tokens
    assert ids(client, t["ada"]) == {"a1": "ada"}
    assert ids(client, t["bob"]) == {"b1": "bob"}
    assert ids(client, ADMIN) == {"a1": "ada", "b1": "bob"}
    assert ids(client, t["tess"]) == {"a1": "ada", "b1": "bob"}
    # the query form of the token scopes the same way
    assert [r["id"] for r in client.get("/api/runs", params={"token": t["bob"]}).json()] == ["b1"]
    # the admin token's runs have no owner: teachers see them, students do not
    assert post(client, "adm", [ev()], ADMIN).status_code == 200
    assert ids(client, ADMIN)["adm"] is None and "adm" not in ids(client, t["ada"])


@pytest.mark.parametrize("route", ["", "/events", "/steps", "/graph", "/events?step=0&kind=node", "/history?name=L:w"])
def test_another_students_run_reads_exactly_as_a_missing_one(client, route):
    t = client.tokens
    mine = client.get(f"/api/runs/b1{route}", headers=auth(t["bob"]))
    assert mine.status_code == 200
    theirs = client.get(f"/api/runs/b1{route}", headers=auth(t["ada"]))
    missing = client.get(f"/api/runs/zz{route}", headers=auth(t["ada"]))
    assert theirs.status_code == missing.status_code == 404
    assert theirs.json()["detail"] == missing.json()["detail"].replace("'zz'", "'b1'")
    # teachers read it
    assert client.get(f"/api/runs/b1{route}", headers=auth(t["tess"])).status_code == 200
    assert client.get(f"/api/runs/b1{route}", headers=auth(ADMIN)).json() == mine.json()


def test_a_student_cannot_delete_another_students_run_but_can_delete_their_own(client):
    t = client.tokens
    r = client.delete("/api/runs/b1", headers=auth(t["ada"]))
    missing = client.delete("/api/runs/zz", headers=auth(t["ada"]))
    assert r.status_code == missing.status_code == 404
    assert r.json()["detail"] == missing.json()["detail"].replace("'zz'", "'b1'")
    assert client.get("/api/runs/b1", headers=auth(t["bob"])).json()["n_events"] == 4  # still there, whole
    assert client.delete("/api/runs/a1", headers=auth(t["ada"])).json() == {"deleted": "a1"}
    assert ids(client, t["ada"]) == {}


def test_posting_into_another_students_run_is_403_and_stores_nothing(client):
    t = client.tokens
    before = client.get("/api/runs/b1/events", headers=auth(ADMIN)).json()["events"]
    for batch in ([node(9)], [ev("run_end", None, status="ok")], []):
        r = post(client, "b1", batch, t["ada"])
        assert r.status_code == 403, (batch, r.text)
        assert "another user" in r.json()["detail"] and "bob" not in r.json()["detail"]
    after = client.get("/api/runs/b1/events", headers=auth(ADMIN)).json()["events"]
    assert after == before
    run = client.get("/api/runs/b1", headers=auth(ADMIN)).json()
    assert run["owner"] == "bob" and run["status"] == "running" and run["n_events"] == 4
    # the owner still appends, from the next seq
    assert post(client, "b1", [node(3)], t["bob"]).json()["first_seq"] == 5


def test_teachers_may_add_to_any_run_and_own_the_runs_they_start(client):
    t = client.tokens
    assert post(client, "b1", [node(7)], t["tess"]).json()["first_seq"] == 5
    assert post(client, "b1", [node(8)], ADMIN).json()["first_seq"] == 6
    assert client.get("/api/runs/b1", headers=auth(ADMIN)).json()["owner"] == "bob"  # still bob's
    assert post(client, "t1", [ev()], t["tess"]).status_code == 200
    assert ids(client, ADMIN)["t1"] == "tess" and "t1" not in ids(client, t["bob"])


def test_who_am_i(client):
    t = client.tokens
    assert client.get("/api/me", headers=auth(t["ada"])).json() == {"name": "ada", "teacher": False,
                                                                      "reads_all": False}
    assert client.get("/api/me", headers=auth(t["tess"])).json() == {"name": "tess", "teacher": True,
                                                                       "reads_all": True}
    assert client.get("/api/me", headers=auth(ADMIN)).json() == {"name": None, "teacher": True, "reads_all": True}


@pytest.mark.parametrize("method,path", [("GET", "/api/runs"), ("GET", "/api/runs/a1"), ("GET", "/api/me"),
                                         ("GET", "/api/runs/a1/events"), ("DELETE", "/api/runs/a1"),
                                         ("POST", "/api/runs/a1/events")])
def test_no_token_or_an_unknown_one_is_401_on_every_route(client, method, path):
    for headers in ({}, auth("not-anyones-token"), auth(hash_token(client.tokens["ada"]))):
        r = client.request(method, path, headers={**NDJSON, **headers}, content="")
        assert r.status_code == 401, (headers, r.text)
    assert client.get("/api/runs/a1", headers=auth(ADMIN)).status_code == 200  # nothing was changed


def _ws_closed_code(client: TestClient, path: str) -> int:
    with pytest.raises(WebSocketDisconnect) as info:
        with client.websocket_connect(path) as ws:
            ws.receive_text()
    return info.value.code


def test_run_stream_of_another_students_run_closes_as_a_missing_one(client):
    t = client.tokens
    assert _ws_closed_code(client, f"/api/runs/b1/ws?token={t['ada']}") == NO_SUCH_RUN
    assert _ws_closed_code(client, f"/api/runs/zz/ws?token={t['ada']}") == NO_SUCH_RUN
    assert _ws_closed_code(client, "/api/runs/a1/ws?token=wrong") == 1008
    with client.websocket_connect(f"/api/runs/b1/ws?token={t['bob']}") as ws:
        hello = json.loads(ws.receive_text())
        assert hello["run"]["owner"] == "bob" and hello["last_seq"] == 4
        assert [e["seq"] for e in json.loads(ws.receive_text())["events"]] == [1, 2, 3, 4]
    for teacher in (t["tess"], ADMIN):  # teachers watch any run, and a run that has not started yet
        with client.websocket_connect(f"/api/runs/b1/ws?token={teacher}") as ws:
            assert json.loads(ws.receive_text())["run"]["id"] == "b1"
        with client.websocket_connect(f"/api/runs/later/ws?token={teacher}") as ws:
            assert json.loads(ws.receive_text())["run"]["status"] == "waiting"


def test_a_students_lobby_lists_and_announces_only_their_runs(client):
    t = client.tokens
    with client.websocket_connect(f"/api/ws?token={t['ada']}") as ada, \
            client.websocket_connect(f"/api/ws?token={t['tess']}") as tess:
        assert [r["id"] for r in json.loads(ada.receive_text())["runs"]] == ["a1"]
        assert sorted(r["id"] for r in json.loads(tess.receive_text())["runs"]) == ["a1", "b1"]
        # bob's new run first, then ada's: ada's lobby, in order, must next announce her own, not bob's
        assert post(client, "b2", [ev("run_start", None, name="bob again")], t["bob"]).status_code == 200
        assert post(client, "a2", [ev("run_start", None, name="ada again")], t["ada"]).status_code == 200
        assert post(client, "b1", [ev("run_end", None, status="ok")], t["bob"]).status_code == 200
        assert post(client, "a1", [ev("run_end", None, status="ok")], t["ada"]).status_code == 200
        seen = [json.loads(ada.receive_text())["run"] for _ in range(2)]
        assert [(r["id"], r["owner"]) for r in seen] == [("a2", "ada"), ("a1", "ada")]
        teacher = [json.loads(tess.receive_text())["run"]["id"] for _ in range(4)]
        assert teacher == ["b2", "a2", "b1", "a1"]


def test_tokens_are_stored_hashed_never_themselves(klass):
    values = table_values(klass["db"])
    raw = Path(klass["db"]).read_bytes() if not klass["db"].startswith("postgresql") else b""
    for token in klass["tokens"].values():
        assert not any(token in v for v in values) and token.encode() not in raw
        assert hash_token(token) in values
    store = open_store(klass["db"], read_only=not klass["db"].startswith("postgresql"))
    try:
        assert [(u["name"], u["teacher"]) for u in store.list_users()] == [("ada", False), ("bob", False),
                                                                             ("tess", True)]
        assert store.find_user(hash_token(klass["tokens"]["bob"]))["name"] == "bob"
    finally:
        store.close()


def test_a_database_with_users_and_no_token_is_refused_at_start(klass, capsys):
    with pytest.raises(AccountsNeedToken, match=r"3 user accounts \(ada, bob, tess\).*--token"):
        create_app(db=klass["db"])
    assert main(["serve", "--db", klass["db"], "--port", "0", "--nice", "0"]) == 2
    assert "no --token" in capsys.readouterr().err
    if klass["db"].startswith("postgresql://"):  # several workers: refused by the parent, before any fork
        assert main(["serve", "--db", klass["db"], "--port", "0", "--nice", "0", "--workers", "2"]) == 2
        assert "no --token" in capsys.readouterr().err
    with TestClient(create_app(db=klass["db"], token=ADMIN)) as c:  # the file was not left locked
        assert c.get("/api/runs", headers=auth(ADMIN)).json() == []


def test_a_server_without_token_or_users_is_one_user_as_before(tmp_path):
    with TestClient(create_app(db=str(tmp_path / "solo.db"))) as c:
        r = c.post("/api/runs/r/events", content=json.dumps(ev()), headers=NDJSON)
        assert r.status_code == 200
        assert c.get("/api/runs").json()[0]["owner"] is None
        assert c.get("/api/me").json() == {"name": None, "teacher": True, "reads_all": True}
        assert c.delete("/api/runs/r").status_code == 200


def test_a_server_with_a_token_and_no_users_has_only_the_admin(tmp_path):
    with TestClient(create_app(db=str(tmp_path / "t.db"), token=ADMIN)) as c:
        assert c.get("/api/runs").status_code == 401
        assert c.get("/api/runs", headers=auth(ADMIN)).status_code == 200


def test_a_user_added_while_the_server_runs_is_known_at_once(new_db):
    # a server with accounts asks the store again for a token it has not seen (only found users are remembered)
    db = new_db()
    add_user(db, "first", create=True)
    app = create_app(db=db, token=ADMIN)
    with TestClient(app) as c:
        store = app.state.store
        late = "a-token-for-the-late-student"
        assert c.get("/api/runs", headers=auth(late)).status_code == 401
        store.add_user("late", hash_token(late))
        assert c.get("/api/me", headers=auth(late)).json()["name"] == "late"


# -- the CLI ------------------------------------------------------------------------------------------------------
def test_users_add_prints_a_fresh_token_once_and_list_shows_names_and_roles(new_db, capsys):
    db = new_db()
    assert main(["users", "add", "ada", "--db", db, "--create"]) == 0
    out = capsys.readouterr()
    token = out.out.strip()
    assert len(token) >= 43 and "\n" not in token and "shown once" in out.err
    assert main(["users", "add", "tess", "--teacher", "--db", db]) == 0
    other = capsys.readouterr().out.strip()
    assert other != token
    assert main(["users", "list", "--db", db]) == 0
    listed = capsys.readouterr().out
    assert [line.split()[:2] for line in listed.splitlines()] == [["ada", "student"], ["tess", "teacher"]]
    assert token not in listed and hash_token(token) not in listed
    with TestClient(create_app(db=db, token=ADMIN)) as c:
        assert c.get("/api/me", headers=auth(token)).json()["name"] == "ada"


def test_users_add_errors_are_clear(request, tmp_path, new_db, capsys):
    missing = str(tmp_path / "typo.db")
    assert main(["users", "add", "ada", "--db", missing]) == 1
    assert "no database at" in capsys.readouterr().err and not Path(missing).exists()
    assert main(["users", "list", "--db", missing]) == 1
    assert "no database at" in capsys.readouterr().err
    db = new_db()
    if backend(request) == "postgres":  # a database the server cannot find is named, without the password
        gone = db.rsplit("/", 1)[0].replace("rtxviz@", "rtxviz:pw@") + "/no_such_db"
        assert main(["users", "add", "ada", "--db", gone]) == 1
        err = capsys.readouterr().err
        assert "no_such_db" in err and "pw" not in err
    assert main(["users", "add", "ada", "--db", db, "--create"]) == 0
    capsys.readouterr()
    assert main(["users", "add", "ada", "--db", db]) == 1
    assert "already a user named 'ada'" in capsys.readouterr().err
    if backend(request) == "postgres":  # found by a docs walk: this message printed the URL, password and all
        assert main(["users", "add", "ada", "--db", db.replace("rtxviz@", "rtxviz:pw@")]) == 1
        err = capsys.readouterr().err
        assert "already a user named 'ada'" in err and ":pw@" not in err
    with pytest.raises(SystemExit) as exit_:
        main(["users", "add", "ada lovelace", "--db", db])
    assert exit_.value.code == 2 and "1-64 letters" in capsys.readouterr().err
    assert main(["users"]) == 2


# -- the real emitter -----------------------------------------------------------------------------------------------
def test_a_students_watch_streams_into_their_own_run_and_another_student_cannot_follow_it(klass):
    import urllib.error
    import urllib.request

    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    import rtxviz.events as events

    from .server import ThreadServer
    from .test_live import train

    t = klass["tokens"]
    with ThreadServer(create_app(db=klass["db"], token=ADMIN)) as url:
        ws_url = url.replace("http", "ws")
        with events.watch(url, run_name="ada's mlp", run_id="ada-live", token=t["ada"], flush_interval=0.01) as run:
            train(run, 2)
        n = run.stats()["sent"]
        assert run.dropped == 0 and n > 0
        req = urllib.request.Request(f"{url}/api/runs/ada-live", headers=auth(ADMIN))
        with urllib.request.urlopen(req) as r:
            info = json.loads(r.read())
        assert info["owner"] == "ada" and info["n_events"] == n and info["status"] == "ok"
        with connect(f"{ws_url}/api/runs/ada-live/ws?token={t['ada']}", open_timeout=10) as ws:
            assert json.loads(ws.recv(timeout=10))["last_seq"] == n
        with connect(f"{ws_url}/api/runs/ada-live/ws?token={t['bob']}", open_timeout=10) as ws:
            with pytest.raises(ConnectionClosed) as closed:
                ws.recv(timeout=10)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == NO_SUCH_RUN
        # bob's emitter, told to write into ada's run id, is refused (403): her run keeps its events
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(urllib.request.Request(
                f"{url}/api/runs/ada-live/events", data=json.dumps(ev()).encode(), method="POST",
                headers={**NDJSON, **auth(t["bob"])}))
        assert refused.value.code == 403
        with urllib.request.urlopen(req) as r:
            assert json.loads(r.read())["n_events"] == n
