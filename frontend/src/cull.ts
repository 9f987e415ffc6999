// Which part of a large drawing gets elements: above CULL_MIN_ITEMS visible items only the nodes and edges within a
// screen of the view are built; the rest are built when the view comes near (view.ts drawNear), as labels are. An
// "expand all" of a 2,500-node GPT lands at the smallest zoom with about 190 of its nodes on screen (the graph is
// 13 screens tall there): building, styling and painting the other 2,300 was most of its time. Pure (no DOM), so
// it is unit-tested under node.
import type { Bounds } from "./fit";
import { NODE_H, NODE_W, type Pos } from "./place";

/** Graphs with fewer visible items than this are drawn whole (every item an element, whatever the view). */
export const CULL_MIN_ITEMS = 1000;

/** The drawing's part (graph coordinates) within one screen of the view in each direction, for a view at
 * translate (tx, ty), zoom k, on a w x h screen; everything when the screen has no size yet (a hidden tab). */
export function nearWindow(tx: number, ty: number, k: number, w: number, h: number): Bounds {
  if (!(w > 0 && h > 0 && k > 0)) return { x0: -Infinity, y0: -Infinity, x1: Infinity, y1: Infinity };
  return { x0: (-tx - w) / k, y0: (-ty - h) / k, x1: (2 * w - tx) / k, y1: (2 * h - ty) / k };
}

/** The view's own screen (graph coordinates) lies inside `w`: nothing new comes near until it leaves. */
export function viewInside(w: Bounds, tx: number, ty: number, k: number, sw: number, sh: number): boolean {
  if (!(sw > 0 && sh > 0 && k > 0)) return w.x0 === -Infinity;
  return -tx / k >= w.x0 && -ty / k >= w.y0 && (sw - tx) / k <= w.x1 && (sh - ty) / k <= w.y1;
}

/** A node centred at `p` touches `w` (its box, with room above for its badge). */
export function nodeNear(p: Pos, w: Bounds): boolean {
  return p.x + NODE_W / 2 >= w.x0 && p.x - NODE_W / 2 <= w.x1 && p.y + NODE_H / 2 >= w.y0 && p.y - NODE_H / 2 - 16 <= w.y1;
}

/** An edge from the node at `a` to the node at `b` may cross `w`: its curve stays inside the box spanned by its
 * two ends (a cubic's control points here share the ends' x and lie between their y), so a long edge that passes
 * through the window is drawn even when both its ends are far. */
export function edgeNear(a: Pos, b: Pos, w: Bounds): boolean {
  const x0 = Math.min(a.x, b.x), x1 = Math.max(a.x, b.x);
  const y0 = Math.min(a.y, b.y) - NODE_H, y1 = Math.max(a.y, b.y) + NODE_H;
  return x1 >= w.x0 && x0 <= w.x1 && y1 >= w.y0 && y0 <= w.y1;
}
