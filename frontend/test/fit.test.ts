import { test } from "node:test";
import assert from "node:assert/strict";
import { OVERVIEW_SCREENS, READABLE_K, fitTransform } from "../src/fit";
import { NODE_H, NODE_W, ROW } from "../src/place";

const chain = (rows: number) => ({ x0: -NODE_W / 2, y0: -NODE_H / 2, x1: NODE_W / 2, y1: (rows - 1) * ROW + NODE_H / 2 });

test("a small graph is fitted whole, at most at 1.2", () => {
  const t = fitTransform(chain(3), 810, 800);
  assert.equal(t.k, 1.2);
  assert.equal(t.tx, 405); // centred across: the node's centre (x = 0) in the middle
});

test("a 26-row chain stops at the readable zoom, its top in view", () => {
  const b = chain(26);
  const t = fitTransform(b, 810, 800);
  assert.ok((800 - 64) / (b.y1 - b.y0) < READABLE_K); // fitted whole its 13 px titles would be under 11 px
  assert.equal(t.k, READABLE_K);
  assert.equal(b.y0 * t.k + t.ty, 44); // the first row's top 44 px below the canvas' top
});

test("a graph of many screens is fitted whole as an overview", () => {
  const b = { x0: 0, y0: 0, x1: 60 * 170, y1: 100 * ROW };
  assert.ok((b.x1 * READABLE_K * b.y1 * READABLE_K) / (810 * 800) > OVERVIEW_SCREENS);
  const t = fitTransform(b, 810, 800);
  assert.ok(t.k < READABLE_K);
  assert.ok(b.x1 * t.k <= 810 - 40 + 1e-9 && b.y1 * t.k <= 800 - 64 + 1e-9);
});
