"""Lessons (issue 15, point 12): `rtxviz lesson` lists and runs them; the page shows the lesson's text beside its
real engine run, rendered as text (no markup from the file becomes an element), with a next button; the lessons
export as offline HTML files."""

from __future__ import annotations

import json
import queue
import threading
import urllib.error
import urllib.request

from rtxviz.cli import main

from .conftest import post_events
from .graphs import XSS, ev


def run_id_named(server: str, name: str) -> str:
    runs = json.loads(urllib.request.urlopen(f"{server}/api/runs").read())
    return next(r["id"] for r in runs if r["name"] == name)


def test_lesson_command_lists_the_ladder(capsys):
    assert main(["lesson"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[1] for line in out[:11]] == [
        "neuron", "chain-rule", "fan-out", "broadcasting", "softmax-cross-entropy", "vanishing", "nan-hunt",
        "higher-order", "mlp-digits", "checkpointing", "graph-cache"]
    assert main(["lesson", "no-such-lesson", "--url", "http://127.0.0.1:9"]) == 2


def test_a_lesson_runs_in_the_live_page_with_its_text_and_next_button(page, server, capsys):
    assert main(["lesson", "neuron", "--url", server]) == 0
    assert main(["lesson", "chain-rule", "--url", server]) == 0
    assert f"lesson 1: A neuron by hand: {server}/" in capsys.readouterr().out
    page.goto(f"{server}/?run={run_id_named(server, 'lesson 1: A neuron by hand')}")
    page.wait_for_selector("#lesson:not([hidden])")
    assert page.locator("#lesson-title").text_content() == "Lesson 1: A neuron by hand"
    body = page.locator("#lesson-body")
    assert body.locator("h3").count() == 0  # the title is not repeated
    assert body.locator("code").first.text_content() == "o = tanh(x1·w1 + x2·w2 + b)"
    assert body.locator("li").count() == 3 and body.locator("strong").first.text_content() == "data"
    # the run is the engine's: micrograd's numbers on the nodes
    page.wait_for_function("document.querySelector('#counts').textContent.includes('backward: done')")
    badge = page.evaluate("() => [...document.querySelectorAll('g.vnode')].find(n => n.dataset.key === 'L:x1')"
                          ".querySelector('text.badge-text').textContent")
    assert badge == "grad -1.5"
    page.click(".lesson-next-btn")
    page.wait_for_function("document.querySelector('#lesson-title').textContent === 'Lesson 2: The chain rule'")
    assert page.locator("#run-title").text_content() == "lesson 2: The chain rule"
    assert page.locator("#lesson-body pre.lesson-code").text_content().startswith("dL/dx = dL/dy")
    assert page.locator("#lesson-hint").text_content() == "(not run yet: the button starts it)"
    # this server is a plain one (no lesson runner): the next button says how to start the lesson
    page.click(".lesson-next-btn")
    page.wait_for_function("document.querySelector('#lesson-hint').textContent.startsWith('This server')")
    assert page.locator("#lesson-hint").text_content() == (
        "This server runs no lessons (rtxviz serve). Start it with: rtxviz lesson fan-out")


def test_next_starts_the_next_lesson_in_the_page_that_rtxviz_lesson_serves(page, tmp_path, monkeypatch):
    # point 12's last part: `rtxviz lesson neuron` serves the page and runs lesson 2 when its next button asks
    from rtxviz.cli.lesson import serve_lessons
    from rtxviz.lessons import find

    monkeypatch.setenv("RTXVIZ_DB", str(tmp_path / "runs.db"))
    stop, urls = threading.Event(), queue.Queue()
    runner = threading.Thread(target=serve_lessons, args=([find("neuron")], 0, stop), kwargs={"ready": urls.put},
                              daemon=True)
    runner.start()
    try:
        url = urls.get(timeout=60)
        names = lambda: [r["name"] for r in json.loads(urllib.request.urlopen(f"{url}/api/runs").read())]  # noqa: E731
        assert names() == ["lesson 1: A neuron by hand"]
        page.goto(url + "/")
        page.wait_for_function("document.querySelector('#lesson-title').textContent === 'Lesson 1: A neuron by hand'")
        assert page.locator("#lesson-hint").text_content() == "(not run yet: the button starts it)"
        page.click(".lesson-next-btn")
        page.wait_for_function("document.querySelector('#lesson-title').textContent === 'Lesson 2: The chain rule'",
                               timeout=60_000)
        assert page.locator("#run-title").text_content() == "lesson 2: The chain rule"
        assert page.locator("#lesson-body pre.lesson-code").text_content().startswith("dL/dx = dL/dy")
        # a real engine run of the lesson, drawn: its backward finished, and the server holds both runs
        page.wait_for_function("document.querySelector('#counts').textContent.includes('backward: done')")
        assert page.locator("g.vnode").count() > 0
        assert sorted(names()) == ["lesson 1: A neuron by hand", "lesson 2: The chain rule"]
        # an unknown lesson is refused by name, and nothing runs
        req = urllib.request.Request(f"{url}/api/lessons/start", data=b'{"name": "nope"}', method="POST",
                                     headers={"Content-Type": "application/json"})
        try:
            urllib.request.urlopen(req)
            raise AssertionError("an unknown lesson was accepted")
        except urllib.error.HTTPError as exc:
            assert exc.code == 404 and "no lesson 'nope'" in exc.read().decode()
    finally:
        stop.set()
        runner.join(30)
    assert not runner.is_alive()


def test_lesson_text_is_rendered_as_text(strict_page, server):
    page = strict_page
    text = f"# t\n\n{XSS} **bold** <script>alert(2)</script>\n\n- `{XSS}`\n\n```\n{XSS}\n```\n"
    post_events(server, "xss-lesson", [
        ev("run_start", None, name="xss lesson"),
        ev("lesson", None, name="x", title="t", number=1, text=text, next=None),
        ev("step_begin", 0), ev("leaf", 0, id=1, name="a", shape=[1], dtype="float32", device="cpu",
                                requires_grad=True),
        ev("node", 0, id=1, op="exp", inputs=[{"leaf": 1}], shape=[1], dtype="float32", device="cpu"),
    ])
    page.goto(server + "/")
    page.wait_for_selector("#lesson:not([hidden])")
    body = page.locator("#lesson-body")
    assert XSS in body.text_content() and "<script>alert(2)</script>" in body.text_content()
    assert page.locator("#lesson img, #lesson script").count() == 0
    assert body.locator("strong").text_content() == "bold"
    assert page.dialogs == []


def test_lessons_export_as_offline_html(browser, tmp_path):
    assert main(["lesson", "higher-order", "--all", "--export", str(tmp_path)]) == 0
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["08-higher-order.html", "09-mlp-digits.html", "10-checkpointing.html", "11-graph-cache.html",
                     "index.html"]
    assert main(["lesson", "neuron", "--export", str(tmp_path)]) == 0
    ctx = browser.new_context(viewport={"width": 1400, "height": 860})
    try:
        pg = ctx.new_page()
        requests: list[str] = []
        pg.on("request", lambda r: requests.append(r.url))
        pg.goto((tmp_path / "01-neuron.html").as_uri())
        pg.wait_for_selector("#lesson:not([hidden])", timeout=30_000)
        assert pg.locator("#lesson-title").text_content() == "Lesson 1: A neuron by hand"
        assert pg.locator("a.lesson-next-btn").get_attribute("href") == "02-chain-rule.html"
        pg.wait_for_selector("g.vnode", timeout=30_000)
        assert all(u.startswith(("file:", "data:", "blob:")) for u in requests)  # offline: no server asked
    finally:
        ctx.close()


def test_every_lesson_is_a_real_engine_run_that_shows_its_point():
    from rtxviz.lessons import catalog, run_lesson
    from rtxviz.schema import validate_batch

    from .engine_runs import KeepEvents

    runs = {}
    for lesson in catalog():
        keep = KeepEvents()
        run_lesson(lesson, transport=keep)
        validate_batch(keep.events)
        kinds = [e["kind"] for e in keep.events]
        assert kinds[:2] == ["run_start", "lesson"] and "node" in kinds and "grad" in kinds, lesson.name
        runs[lesson.name] = keep.events

    def leaf_grads(events, step):
        names = {e["id"]: e["name"] for e in events if e["kind"] == "leaf"}
        return {names[e["leaf"]]: e["stats"] for e in events if e["kind"] == "leaf_grad" and e["step"] == step}

    # vanishing: through 30 sigmoids x's gradient is below 0.25**30 (vanishing); the residual tanh step's is not
    assert leaf_grads(runs["vanishing"], 0)["x"]["norm"] < 0.25 ** 30 * 2
    assert leaf_grads(runs["vanishing"], 1)["x"]["norm"] > 1.0
    # broadcasting: b's gradient is the column sums of x (d((x + b)·x)/db = x, summed over the rows)
    assert leaf_grads(runs["broadcasting"], 0)["b"]["values"] == [5.0, 7.0, 9.0]
    # softmax + cross-entropy: softmax(z) - onehot(2), by hand
    import math

    z = [1.0, 2.0, 0.5, -1.0]
    p = [math.exp(v) / sum(math.exp(u) for u in z) for v in z]
    got = leaf_grads(runs["softmax-cross-entropy"], 0)["logits"]["values"]
    assert all(math.isclose(a, b - (i == 2), abs_tol=1e-12) for i, (a, b) in enumerate(zip(got, p, strict=True)))
    # the NaN hunt: the first NaN is made by sqrt
    first = next(e for e in runs["nan-hunt"] if e["kind"] == "anomaly")
    assert first["op"] == "sqrt" and first["origin"] is True
    # higher order: d/dx sum(3x²) = 6x
    assert leaf_grads(runs["higher-order"], 0)["x"]["values"] == [6.0, 12.0]
    # the MLP learns: the loss (a scalar, its value sent) is lower at the last step than at the first
    losses = [e["values"][0] for e in runs["mlp-digits"] if e["kind"] == "node" and e["op"] == "cross_entropy"]
    assert len(losses) == 20 and losses[-1] < losses[0] * 0.8
    # ... from 2.33 to 1.35, while the weights' gradients grow, and its groups are model.0 and model.2, as its text
    # says (review, eighteenth session: the text said the gradients shrink, and named groups fc1 and fc2)
    text = next(lesson for lesson in catalog() if lesson.name == "mlp-digits").text
    first, last = leaf_grads(runs["mlp-digits"], 0), leaf_grads(runs["mlp-digits"], 19)
    for said in (f"from {losses[0]:.2f} to {losses[-1]:.2f}",
                 f"`model.2.weight`'s norm\ngoes from {first['model.2.weight']['norm']:.2f} to "
                 f"{last['model.2.weight']['norm']:.2f}",
                 f"`model.0.weight`'s from {first['model.0.weight']['norm']:.2f} to "
                 f"{last['model.0.weight']['norm']:.2f}"):
        assert said in text, said
    modules = {e["module"] for e in runs["mlp-digits"] if e["kind"] == "node"}
    assert {"model.0", "model.2"} <= modules and "`model.0` and `model.2`" in text and "fc1" not in text
    # checkpointing: the segment is recomputed in backward
    phases = [e["phase"] for e in runs["checkpointing"] if e["kind"] == "checkpoint"]
    assert phases == ["begin", "end", "recompute_begin", "recompute_end"]
    # the graph cache: recorded in step 0, replayed in steps 1 and 2 (which record no nodes)
    cache = [(e["action"], e["step"]) for e in runs["graph-cache"] if e["kind"] == "graph_cache"]
    assert ("hit", 1) in cache and ("hit", 2) in cache
    assert {e["step"] for e in runs["graph-cache"] if e["kind"] == "node"} == {0}
