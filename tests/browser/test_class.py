"""A class server's page in a real Chromium (issue 20): a teacher's run list shows whose run is whose and filters by
student; a student's page shows only the student's own runs, also as new runs start."""

from __future__ import annotations

from typing import Any

import pytest

from ..web.server import ThreadServer
from .conftest import WAIT_MS, _skip_reason, post_events
from .graphs import ev

ADMIN = "class-admin-token"


def run(name: str) -> list[dict[str, Any]]:
    return [ev("run_start", None, name=name), ev("step_begin", 0),
            ev("leaf", 0, id=1, name="x", shape=[2], dtype="float32", device="cpu", requires_grad=True)]


@pytest.fixture()
def class_server(tmp_path):
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    from rtxviz.cli.users import add_user
    from rtxviz.web.app import create_app

    db = str(tmp_path / "class.db")
    tokens = {name: add_user(db, name, create=True) for name in ("ada", "bob")}
    with ThreadServer(create_app(db=db, token=ADMIN)) as url:
        post_events(url, "ada-1", run("ada's first"), token=tokens["ada"])
        post_events(url, "bob-1", run("bob's first"), token=tokens["bob"])
        yield url, tokens


def _open(browser, url: str, token: str):
    ctx = browser.new_context(viewport={"width": 1400, "height": 860}, bypass_csp=True)
    ctx.set_default_timeout(WAIT_MS)
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{url}/?token={token}")
    return ctx, page, errors


def listed(page) -> list[tuple[str, str | None]]:
    """(run name, owner shown or None) of every run the list shows."""
    rows = page.evaluate("[...document.querySelectorAll('#runs li.run')].map(li => [li.querySelector('.run-name')"
                         ".textContent, li.querySelector('.run-owner')?.textContent ?? null])")
    return [(name, owner) for name, owner in rows]


def test_teacher_sees_every_students_run_with_its_owner_and_filters_by_student(browser, class_server):
    url, tokens = class_server
    ctx, page, errors = _open(browser, url, ADMIN)
    try:
        page.wait_for_function("document.querySelectorAll('#runs li.run').length === 2")
        assert sorted(listed(page)) == [("ada's first", "ada"), ("bob's first", "bob")]
        select = page.locator("#owner-filter")
        assert select.is_visible()
        assert page.evaluate("[...document.querySelectorAll('#owner-filter option')].map(o => o.value)") == \
            ["", "ada", "bob"]
        select.select_option("bob")
        page.wait_for_function("document.querySelectorAll('#runs li.run').length === 1")
        assert listed(page) == [("bob's first", "bob")]
        assert "student=bob" in page.url
        # a new run of bob's appears live (lobby) in the filtered list; ada's new one stays out of it
        post_events(url, "ada-2", run("ada's second"), token=tokens["ada"])
        post_events(url, "bob-2", run("bob's second"), token=tokens["bob"])
        page.wait_for_function("document.querySelectorAll('#runs li.run').length === 2")
        assert sorted(listed(page)) == [("bob's first", "bob"), ("bob's second", "bob")]
        select.select_option("")
        page.wait_for_function("document.querySelectorAll('#runs li.run').length === 4")
        assert errors == []
    finally:
        ctx.close()


def test_student_sees_only_their_own_runs(browser, class_server):
    url, tokens = class_server
    ctx, page, errors = _open(browser, url, tokens["ada"])
    try:
        page.wait_for_function("document.querySelectorAll('#runs li.run').length === 1")
        assert listed(page) == [("ada's first", None)]  # no owner column: every run listed is hers
        assert not page.locator("#owner-filter").is_visible()
        assert page.locator("#whoami").text_content() == "signed in as ada"
        page.wait_for_selector("#run-title:has-text(\"ada's first\")")
        # bob's new run is announced before ada's: once hers is listed, bob's would have been too
        post_events(url, "bob-2", run("bob's second"), token=tokens["bob"])
        post_events(url, "ada-2", run("ada's second"), token=tokens["ada"])
        page.wait_for_function("document.querySelectorAll('#runs li.run').length === 2")
        assert sorted(listed(page)) == [("ada's first", None), ("ada's second", None)]
        assert "bob" not in page.locator("#runs").inner_text()
        assert errors == []
    finally:
        ctx.close()
