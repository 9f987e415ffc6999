import { test } from "node:test";
import assert from "node:assert/strict";
import { edgeNear, nearWindow, nodeNear, viewInside } from "../src/cull";
import { NODE_H, NODE_W } from "../src/place";

test("the near window is the view and a screen around it, in graph coordinates", () => {
  // an 800 x 600 screen at zoom 0.5, the drawing's (100, 200) at the screen's top left
  const w = nearWindow(-50, -100, 0.5, 800, 600);
  assert.deepEqual(w, { x0: 100 - 1600, y0: 200 - 1200, x1: 100 + 2 * 1600, y1: 200 + 2 * 1200 });
  assert.ok(viewInside(w, -50, -100, 0.5, 800, 600));
  // panned by less than a screen: still inside; by more: out
  assert.ok(viewInside(w, -50 - 700, -100, 0.5, 800, 600));
  assert.ok(!viewInside(w, -50 - 900, -100, 0.5, 800, 600));
  // zoomed out 4x around the same corner: the view is larger than the window
  assert.ok(!viewInside(w, -12.5, -25, 0.125, 800, 600));
});

test("a screen with no size yet draws everything", () => {
  const w = nearWindow(0, 0, 1, 0, 0);
  assert.equal(w.x0, -Infinity);
  assert.ok(nodeNear({ x: 1e9, y: -1e9 }, w));
  assert.ok(viewInside(w, 0, 0, 1, 0, 0));
});

test("a node is near when any of its box (and its badge above) touches the window", () => {
  const w = { x0: 0, y0: 0, x1: 1000, y1: 1000 };
  assert.ok(nodeNear({ x: -NODE_W / 2, y: 500 }, w)); // its right edge on the window's left
  assert.ok(!nodeNear({ x: -NODE_W / 2 - 1, y: 500 }, w));
  assert.ok(nodeNear({ x: 500, y: 1000 + NODE_H / 2 + 16 }, w)); // its badge reaches up into the window
  assert.ok(!nodeNear({ x: 500, y: 1000 + NODE_H / 2 + 17 }, w));
  assert.ok(!nodeNear({ x: 500, y: -NODE_H / 2 - 1 }, w));
});

/** Points on an edge as view.ts drawEdge draws it: from the bottom of `a` to the top of `b`, a cubic whose control
 * points sit below its start and above its end. */
function edgePoints(a: { x: number; y: number }, b: { x: number; y: number }): { x: number; y: number }[] {
  const y1 = a.y + NODE_H / 2, y2 = b.y - NODE_H / 2 - 2;
  const dy = Math.max(20, (y2 - y1) / 2);
  const out = [];
  for (let i = 0; i <= 64; i++) {
    const t = i / 64, u = 1 - t;
    out.push({
      x: u * u * u * a.x + 3 * u * u * t * a.x + 3 * u * t * t * b.x + t * t * t * b.x,
      y: u * u * u * y1 + 3 * u * u * t * (y1 + dy) + 3 * u * t * t * (y2 - dy) + t * t * t * y2,
    });
  }
  return out;
}

test("an edge crossing the window is near though both its ends are far", () => {
  const w = { x0: 0, y0: 0, x1: 1000, y1: 1000 };
  assert.ok(edgeNear({ x: 500, y: -5000 }, { x: 600, y: 5000 }, w));
  assert.ok(!edgeNear({ x: -500, y: -5000 }, { x: -300, y: 5000 }, w)); // beside it
  assert.ok(!edgeNear({ x: 500, y: 2000 }, { x: 600, y: 3000 }, w)); // below it
});

test("every edge that the drawn curve takes through the window is near (random edges, both directions)", () => {
  const w = { x0: 0, y0: 0, x1: 1000, y1: 800 };
  let seed = 7;
  const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648) * 4000 - 1500;
  let crossing = 0;
  for (let i = 0; i < 5000; i++) {
    const a = { x: rnd(), y: rnd() }, b = { x: rnd(), y: rnd() };
    const inside = edgePoints(a, b).some((p) => p.x >= w.x0 && p.x <= w.x1 && p.y >= w.y0 && p.y <= w.y1);
    if (inside) {
      crossing++;
      assert.ok(edgeNear(a, b, w), `edge ${JSON.stringify([a, b])} crosses the window`);
    }
  }
  assert.ok(crossing > 500); // the check saw many crossing edges
});
