"""The widget's size in a real JupyterLab: it fits its graph (a small graph takes less room than a big one, which
stops at the upper bound and is zoomed out to fit), the user can drag its corner, and a re-run cell keeps the
dragged size (the height travels to the kernel, which gives it to the cell's next view)."""

from __future__ import annotations

import pytest

from ..browser.shared_browser import acquire, release
from .jupyterlab_server import WAIT_MS, JupyterLab, write_notebook

FIT_MIN, FIT_MAX = 320, 900  # frontend/src/widget.ts

SMALL = """\
import rtxviz
from rtxviz import Tensor, Variable
x = Variable.from_tensor(Tensor.from_slice([0.5, -1.0], [2]), name="x")
y = (x.tanh() * x).sum()
y.backward()
rtxviz.notebook.show(y)
"""
BIG = """\
h = Variable.from_tensor(Tensor.from_slice([0.5, -1.0], [2]), name="h0")
for i in range(40):
    h = (h * 0.9).tanh()
z = h.sum()
z.backward()
rtxviz.notebook.show(z)
"""

_NB = "window.jupyterapp.shell.currentWidget"
BOXES = """() => [...document.querySelectorAll('.jp-Cell')].map(c => {
  const box = c.querySelector('.rtxviz-box');
  const out = c.querySelector('.jp-OutputArea-output');
  return box ? { box: box.getBoundingClientRect().height, out: out.getBoundingClientRect().height,
                 sizing: box.dataset.sizing } : null;
})"""


@pytest.fixture(scope="module")
def lab(jupyterlab):
    write_notebook(jupyterlab.root / "sizes.ipynb", SMALL, BIG)
    return jupyterlab


def _scale(frame) -> float:
    return frame.evaluate("+/scale\\(([\\d.]+)\\)/.exec(document.querySelector('#viewport')"
                          ".getAttribute('transform'))[1]")


def _settled(page) -> list:
    """BOXES once three reads 0.2 s apart agree: a frame may still be reporting its graph's size (seen: a box
    29 px shorter at the first read than when the drag began)."""
    reads = [page.evaluate(BOXES)]
    for _ in range(100):
        page.wait_for_timeout(200)
        reads.append(page.evaluate(BOXES))
        if len(reads) >= 3 and reads[-1] == reads[-2] == reads[-3]:
            return reads[-1]
    return reads[-1]


@pytest.mark.timeout(300)
def test_the_view_fits_its_graph_and_keeps_a_dragged_size(lab: JupyterLab) -> None:
    browser = acquire()
    ctx = browser.new_context(viewport={"width": 1400, "height": 2400}, bypass_csp=True)
    ctx.set_default_timeout(WAIT_MS)
    page = ctx.new_page()
    try:
        page.goto(lab.page_url("sizes.ipynb"))
        kernel = f"{_NB}.sessionContext.session.kernel"
        page.wait_for_function(f"window.jupyterapp && {_NB} && {_NB}.sessionContext && {_NB}.sessionContext.session"
                               f" && {kernel} && {kernel}.status === 'idle'")
        page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
        page.wait_for_function("document.querySelectorAll('iframe.rtxviz-frame').length === 2")
        frames = [page.query_selector_all("iframe.rtxviz-frame")[i].content_frame() for i in (0, 1)]
        for f in frames:
            f.wait_for_function("document.querySelectorAll('g.vnode').length >= 3")
        # the boxes settle once each frame has reported what its graph needs
        page.wait_for_function(f"""(() => {{ const b = [...document.querySelectorAll('.rtxviz-box')];
            return b.length === 2 && +b[0].dataset.height !== 420 && +b[1].dataset.height === {FIT_MAX}; }})()""")
        small, big = _settled(page)
        assert small["sizing"] == big["sizing"] == "fit"
        assert FIT_MIN <= small["box"] < big["box"] == FIT_MAX
        assert small["out"] >= small["box"] and big["out"] >= big["box"]  # the output area holds the whole box
        # the small graph is drawn whole, unshrunk; the big one is zoomed out to fit the bounded box
        inside = frames[0].evaluate("""(() => { const s = document.querySelector('svg#graph').getBoundingClientRect();
            return [...document.querySelectorAll('g.vnode rect.body')].every(r => { const b = r.getBoundingClientRect();
              return b.top >= s.top && b.bottom <= s.bottom; }); })()""")
        assert inside and _scale(frames[0]) >= 1.0 and _scale(frames[1]) < 1.0

        # drag the small view's corner 150 px down: the box follows and the height goes to the kernel
        b = page.query_selector_all(".rtxviz-box")[0].bounding_box()
        page.mouse.move(b["x"] + b["width"] - 3, b["y"] + b["height"] - 3)
        page.mouse.down()
        page.mouse.move(b["x"] + b["width"] - 3, b["y"] + b["height"] + 147, steps=8)
        page.mouse.up()
        page.wait_for_function("document.querySelector('.rtxviz-box').dataset.sizing === 'fixed'")
        dragged = round(page.evaluate(BOXES)[0]["box"])
        assert abs(dragged - (b["height"] + 150)) <= 4  # the box as it was when the drag began, 150 px taller
        # re-run the small cell: its new view opens at the dragged size
        page.evaluate(f"{_NB}.content.activeCellIndex = 0")
        old = page.query_selector_all("iframe.rtxviz-frame")[0]
        page.evaluate("window.jupyterapp.commands.execute('notebook:run-cell')")
        page.wait_for_function("f => !f.isConnected", arg=old)
        page.wait_for_function("document.querySelectorAll('iframe.rtxviz-frame').length === 2")
        again = page.evaluate(BOXES)[0]
        assert again["sizing"] == "fixed" and abs(again["box"] - dragged) <= 1
    finally:
        ctx.close()
        release()
