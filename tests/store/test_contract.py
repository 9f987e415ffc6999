"""What every `RunStore` does, run against each implementation in conftest.STORES."""

from __future__ import annotations

import inspect
import json
import threading
import time

import pytest

from rtxviz.store import RUN_FIELDS, RunStore, SQLiteStore, StoreForbidden, StoreFull, UserExists, hash_token

from .conftest import Opener


def ev(kind: str, step: int | None = None, **fields: object) -> tuple[str, int | None, str]:
    return kind, step, json.dumps({"v": 1, "kind": kind, "t": 0.0, "step": step, **fields}, separators=(",", ":"))


def seqs(rows: list[tuple[int, str]]) -> list[int]:
    return [seq for seq, _ in rows]


def _parameters(fn: object) -> list[tuple[str, object, object]]:
    """Names, kinds and defaults (annotations are each module's own spelling)."""
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]  # type: ignore[arg-type]


def _implementations() -> list[type]:
    try:
        from rtxviz.store.postgres import PostgresStore
    except ImportError:  # psycopg not installed: the PostgreSQL tests skip (conftest.py)
        return [SQLiteStore]
    return [SQLiteStore, PostgresStore]


@pytest.mark.parametrize("impl", _implementations())
def test_an_implementation_has_every_method_of_the_interface_with_its_parameters(impl: type) -> None:
    methods = [name for name, member in vars(RunStore).items() if not name.startswith("_") and callable(member)]
    assert {"append", "delete_run", "has_run", "last_seq", "list_runs", "get_run", "events", "steps",
            "add_user", "find_user", "list_users", "close"} <= set(methods)
    for name in methods:
        assert _parameters(getattr(impl, name)) == _parameters(getattr(RunStore, name)), name


def test_the_store_is_a_run_store(store: RunStore) -> None:
    assert isinstance(store, RunStore) and isinstance(store.path, str)


def test_append_creates_the_run_and_numbers_events_densely_from_one(store: RunStore) -> None:
    assert not store.has_run("r") and store.last_seq("r") == 0 and store.get_run("r") is None
    first, texts = store.append("r", "demo", [ev("step_begin", 0), ev("node", 0, id=1)])
    assert first == 1 and [json.loads(t)["seq"] for t in texts] == [1, 2]
    assert all(t.startswith('{"seq":') for t in texts)
    first, texts = store.append("r", None, [ev("step_end", 0)])
    assert first == 3 and json.loads(texts[0])["seq"] == 3
    assert store.has_run("r") and store.last_seq("r") == 3
    assert seqs(store.events("r")) == [1, 2, 3]
    run = store.get_run("r")
    assert run is not None and tuple(run) == RUN_FIELDS
    assert (run["id"], run["name"], run["status"], run["n_events"], run["last_step"]) == ("r", "demo", "running",
                                                                                           3, 0)


def test_stored_texts_are_the_events_sent_with_seq_first(store: RunStore) -> None:
    kind, step, text = ev("leaf", 2, id=7, name="x")
    _, texts = store.append("r", None, [(kind, step, text)])
    assert json.loads(texts[0]) == {"seq": 1, **json.loads(text)}
    assert store.events("r") == [(1, texts[0])]


def test_lifecycle_events_set_name_meta_status_and_drops(store: RunStore) -> None:
    store.append("r", None, [ev("run_start", name="named", meta={"lr": 0.1})], dropped=3)
    run = store.get_run("r")
    assert run is not None and (run["name"], run["meta"], run["status"], run["dropped"]) == ("named", {"lr": 0.1},
                                                                                            "running", 3)
    store.append("r", None, [ev("step_begin", 5)], dropped=1)  # the maximum is kept
    store.append("r", None, [ev("run_end", status="error")])
    run = store.get_run("r")
    assert run is not None and (run["dropped"], run["status"], run["last_step"]) == (3, "error", 5)
    store.append("s", None, [ev("run_end")])
    assert store.get_run("s")["status"] == "ok" and store.get_run("s")["name"] == "s"  # type: ignore[index]


def test_a_new_runs_name_falls_back_to_its_id_and_is_cut_to_256(store: RunStore) -> None:
    store.append("a", None, [])
    store.append("b", "n" * 300, [], meta={"k": 1})
    assert store.get_run("a")["name"] == "a"  # type: ignore[index]
    run = store.get_run("b")
    assert run is not None and run["name"] == "n" * 256 and run["meta"] == {"k": 1}


def test_list_runs_newest_first_with_a_limit(store: RunStore) -> None:
    for run_id in ("a", "b", "c"):
        store.append(run_id, None, [ev("step_begin", 0)])
    assert [r["id"] for r in store.list_runs()] == ["c", "b", "a"]
    assert [r["id"] for r in store.list_runs(2)] == ["c", "b"]
    assert all(tuple(r) == RUN_FIELDS for r in store.list_runs())


def test_events_pages_and_filters(store: RunStore) -> None:
    rows = [ev("step_begin", 0), ev("leaf", 0), ev("node", 0), ev("step_end", 0),
            ev("step_begin", 1), ev("node", 1), ev("step_end", 1), ev("log")]
    store.append("r", None, rows)
    assert seqs(store.events("r")) == list(range(1, 9))
    assert seqs(store.events("r", after=2, limit=3)) == [3, 4, 5]
    assert seqs(store.events("r", after=2, upto=4)) == [3, 4]
    assert seqs(store.events("r", kinds=["leaf", "node"])) == [2, 3, 6]
    assert seqs(store.events("r", kinds=[])) == list(range(1, 9))
    assert seqs(store.events("r", kinds=["node"], step=1)) == [6]
    assert seqs(store.events("r", step=0)) == [1, 2, 3, 4]
    assert store.events("nope") == []


@pytest.mark.parametrize("sizes", [[1, 99, 100, 101], [250, 0, 3], [1000]])
def test_batches_of_any_size_store_every_event_in_order_with_its_kind_and_step(store: RunStore,
                                                                                sizes: list[int]) -> None:
    # SQLite writes a batch 100 rows to a statement plus one for the rest: sizes around that width, and empty
    sent: list[tuple[str, int | None, str]] = []
    for n in sizes:
        batch = [ev(("node", "grad", "log")[i % 3], None if i % 7 == 0 else len(sent) + i, id=len(sent) + i)
                 for i in range(n)]
        first, texts = store.append("r", None, batch)
        assert first == len(sent) + 1 and len(texts) == n
        sent += batch
    stored = store.events("r", limit=10_000)
    assert seqs(stored) == list(range(1, len(sent) + 1))
    # each text is the one sent with its seq put first (json.loads: the same object, seq added)
    assert [json.loads(t) for _, t in stored] == [{"seq": i, **json.loads(e[2])} for i, e in enumerate(sent, 1)]
    assert seqs(store.events("r", kinds=["grad"], limit=10_000)) == [
        i for i, e in enumerate(sent, 1) if e[0] == "grad"]
    some_step = sent[-1][1] if sent[-1][1] is not None else sent[-2][1]
    assert seqs(store.events("r", step=some_step)) == [i for i, e in enumerate(sent, 1) if e[1] == some_step]
    assert store.get_run("r")["n_events"] == len(sent)  # type: ignore[index]


def test_steps_say_where_each_began_and_whether_it_was_sampled(store: RunStore) -> None:
    store.append("r", None, [ev("step_begin", 0), ev("step_end", 0), ev("step_begin", 1, sampled=False),
                             ev("step_end", 1), ev("step_begin", 2)])
    assert store.steps("r") == [{"step": 0, "seq": 1, "sampled": True}, {"step": 1, "seq": 3, "sampled": False},
                                {"step": 2, "seq": 5, "sampled": True}]
    assert len(store.steps("r", limit=2)) == 2 and store.steps("nope") == []


def test_delete_run_removes_it_and_its_events(store: RunStore) -> None:
    store.append("r", None, [ev("step_begin", 0), ev("step_end", 0)])
    store.append("keep", None, [ev("log")])
    assert store.delete_run("r") is True and store.delete_run("r") is False
    assert not store.has_run("r") and store.get_run("r") is None and store.events("r") == []
    assert [r["id"] for r in store.list_runs()] == ["keep"]
    assert store.append("r", None, [ev("log")])[0] == 1  # the id can be used again, from seq 1


def test_bounds_raise_store_full_and_store_nothing(open_store: Opener) -> None:
    store = open_store(max_runs=2, max_events_per_run=3)
    store.append("a", None, [ev("log")])
    store.append("b", None, [ev("log"), ev("log")])
    with pytest.raises(StoreFull, match="max_runs=2"):
        store.append("c", None, [ev("log")])
    with pytest.raises(StoreFull, match="max_events_per_run=3"):
        store.append("b", None, [ev("log"), ev("log")])
    assert not store.has_run("c") and store.last_seq("b") == 2 and seqs(store.events("b")) == [1, 2]
    store.append("b", None, [ev("log")])  # up to the bound is fine
    assert store.last_seq("b") == 3


def test_what_was_appended_survives_a_restart(open_store: Opener) -> None:
    store = open_store()
    store.append("r", "demo", [ev("step_begin", 0), ev("step_end", 0)])
    store.close()
    again = open_store()
    assert again.has_run("r") and again.last_seq("r") == 2 and again.get_run("r")["name"] == "demo"  # type: ignore[index]
    assert again.append("r", None, [ev("log")])[0] == 3


def test_concurrent_appends_keep_seqs_dense_and_ordered(store: RunStore) -> None:
    firsts: list[int] = []
    lock = threading.Lock()

    def writer() -> None:
        for _ in range(20):
            first, _ = store.append("r", None, [ev("log"), ev("log")])
            with lock:
                firsts.append(first)

    threads = [threading.Thread(target=writer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(firsts) == list(range(1, 161, 2))
    assert seqs(store.events("r", limit=1000)) == list(range(1, 161)) and store.last_seq("r") == 160


# -- accounts ------------------------------------------------------------------------------------------------------
def test_a_new_run_is_its_posters_and_only_they_or_the_admin_may_append(store: RunStore) -> None:
    store.append("mine", None, [ev("log")], owner="ada")
    store.append("admins", None, [ev("log")])
    assert store.get_run("mine")["owner"] == "ada" and store.get_run("admins")["owner"] is None  # type: ignore[index]
    assert store.append("mine", None, [ev("log")], owner="ada")[0] == 2
    with pytest.raises(StoreForbidden, match="mine belongs to another user, not bob"):
        store.append("mine", None, [ev("log"), ev("log")], owner="bob")
    with pytest.raises(StoreForbidden):
        store.append("admins", None, [ev("log")], owner="bob")  # nobody's run is not a student's either
    assert store.last_seq("mine") == 2 and seqs(store.events("mine")) == [1, 2]  # the refused batch left nothing
    assert store.append("mine", None, [ev("log")])[0] == 3  # the admin token appends anywhere
    assert store.get_run("mine")["owner"] == "ada"  # type: ignore[index]



def test_a_teacher_appends_to_any_run_and_owns_the_runs_they_create(store: RunStore) -> None:
    store.append("ada1", None, [ev("log")], owner="ada")
    assert store.append("ada1", None, [ev("log")], owner="tess", any_run=True)[0] == 2
    assert store.get_run("ada1")["owner"] == "ada"  # type: ignore[index]  # appending takes nothing over
    store.append("tess1", None, [ev("log")], owner="tess", any_run=True)
    assert store.get_run("tess1")["owner"] == "tess"  # type: ignore[index]
    with pytest.raises(StoreForbidden):
        store.append("tess1", None, [ev("log")], owner="ada")  # and a student may not append to it

def test_list_runs_of_one_owner(store: RunStore) -> None:
    for run_id, owner in (("a1", "ada"), ("b1", "bob"), ("a2", "ada"), ("n", None)):
        store.append(run_id, None, [ev("log")], owner=owner)
    assert [r["id"] for r in store.list_runs(owner="ada")] == ["a2", "a1"]
    assert [r["id"] for r in store.list_runs(1, owner="ada")] == ["a2"]
    assert [r["id"] for r in store.list_runs(owner="nobody")] == []
    assert [(r["id"], r["owner"]) for r in store.list_runs()] == [("n", None), ("a2", "ada"), ("b1", "bob"),
                                                                 ("a1", "ada")]


def test_two_students_racing_for_one_run_id_cannot_both_own_it(store: RunStore) -> None:
    outcomes: dict[str, str] = {}
    barrier = threading.Barrier(2)

    def post(owner: str) -> None:
        barrier.wait()
        try:
            store.append("race", None, [ev("log")], owner=owner)
            outcomes[owner] = "stored"
        except StoreForbidden:
            outcomes[owner] = "forbidden"

    threads = [threading.Thread(target=post, args=(name,)) for name in ("ada", "bob")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes.values()) == ["forbidden", "stored"]
    winner = next(name for name, outcome in outcomes.items() if outcome == "stored")
    assert store.get_run("race")["owner"] == winner and store.last_seq("race") == 1  # type: ignore[index]


def test_users_are_added_found_by_token_hash_and_listed_in_order(store: RunStore) -> None:
    before = time.time()
    ada = store.add_user("ada", hash_token("t-ada"), teacher=True)
    store.add_user("bob.b-2_", hash_token("t-bob"))
    assert ada["name"] == "ada" and ada["teacher"] is True and before <= ada["created"] <= time.time()
    assert store.find_user(hash_token("t-ada")) == ada
    bob = store.find_user(hash_token("t-bob"))
    assert bob is not None and (bob["name"], bob["teacher"]) == ("bob.b-2_", False)
    assert store.find_user(hash_token("t-eve")) is None and store.find_user("t-ada") is None  # the hash, not the token
    assert [(u["name"], u["teacher"]) for u in store.list_users()] == [("ada", True), ("bob.b-2_", False)]


def test_a_taken_name_or_token_is_user_exists_and_a_bad_name_a_value_error(store: RunStore) -> None:
    store.add_user("ada", hash_token("t1"))
    with pytest.raises(UserExists, match="named ada exists"):
        store.add_user("ada", hash_token("t2"))
    with pytest.raises(UserExists, match="token is already"):
        store.add_user("eve", hash_token("t1"))
    for bad in ("", "a b", "x" * 65, "ada;drop", "é"):
        with pytest.raises(ValueError, match="user name must be"):
            store.add_user(bad, hash_token("t3"))
    assert [u["name"] for u in store.list_users()] == ["ada"]


def test_users_and_owners_survive_a_restart(open_store: Opener) -> None:
    store = open_store()
    store.add_user("ada", hash_token("t"))
    store.append("r", None, [ev("log")], owner="ada")
    store.close()
    again = open_store()
    assert again.find_user(hash_token("t"))["name"] == "ada"  # type: ignore[index]
    assert again.get_run("r")["owner"] == "ada"  # type: ignore[index]
    with pytest.raises(StoreForbidden):
        again.append("r", None, [ev("log")], owner="bob")


def _history_batch() -> list[tuple[str, int | None, str]]:
    return [ev("leaf", None, id=1, name="w"), ev("step_begin", 0), ev("node", 0, id=7, op="mul", module="fc"),
            ev("grad", 0, node=7, output={"norm": 2.5, "nan": 1}), ev("leaf_grad", 0, leaf=1, stats={"norm": 3.0})]


def test_the_history_from_decoded_events_is_the_history_from_their_texts(store: RunStore) -> None:
    # the server hands append the events it decoded to validate them; the history must not differ from the one
    # the store reads off the texts
    batch = _history_batch()
    store.append("texts", None, batch)
    store.append("decoded", None, batch, decoded=[json.loads(text) for _, _, text in batch])
    for name in ("fc|mul|1", "L:w"):
        assert store.history("decoded", name) == store.history("texts", name) != []
    assert store.history("decoded", "fc|mul|1") == [(0, 2.5, None, 1)]


def test_hundreds_of_history_rows_in_a_batch_are_stored_and_merged_with_the_next_batchs(store: RunStore) -> None:
    # SQLite writes names and history rows 100 to a statement: 250 values, then 120 of them again (NaN seen)
    n = 250
    first = [ev("step_begin", 0)] + [ev("node", 0, id=i, op="mul", module="m") for i in range(1, n + 1)]
    first += [ev("grad", 0, node=i, output={"norm": float(i)}) for i in range(1, n + 1)]
    store.append("r", None, first)
    store.append("r", None, [ev("grad", 0, node=i, output={"nan": 1}) for i in range(1, 121)])
    for k in (1, 100, 101, 120, 121, 200, 250):
        # node k is the k-th mul of module m; the second batch's grad has no norm: the first one's stays
        assert store.history("r", f"m|mul|{k}") == [(0, float(k), None, int(k <= 120))], k


def test_decoded_events_not_one_per_event_are_refused_and_nothing_is_stored(store: RunStore) -> None:
    batch = _history_batch()
    with pytest.raises(ValueError, match="decoded holds 4 events for a batch of 5"):
        store.append("r", None, batch, decoded=[json.loads(text) for _, _, text in batch[:4]])
    assert not store.has_run("r") and store.history("r", "L:w") == []
