// Where "fit" puts the graph: all of it in view when its labels stay readable so; otherwise at the smallest
// readable zoom, its top rows in view and the rest a pan away, unless it is so large that only an overview helps
// (then all of it, small: labels give way to the far view's shapes and colours).
import { NODE_H, NODE_W } from "./place";

/** The smallest zoom at which a fit stops: the node title (13 px) reads at 11 px, the shape line (11 px) at 9.4. */
export const READABLE_K = 0.85;
/** A graph whose drawing at READABLE_K covers more than this many screens is fitted whole, as an overview. */
export const OVERVIEW_SCREENS = 8;
const MAX_K = 1.2;
const MIN_K = 0.05;
const TOP = 44; // room above the first row for its gradient badges and the canvas' banners

export interface Bounds { x0: number; y0: number; x1: number; y1: number }
export interface Transform { tx: number; ty: number; k: number }

/** The transform that fits `b` (graph coordinates) into a `w`×`h` screen.
 *
 * A 26-node chain (26 rows of 84 px) in an 810×800 canvas is not shrunk to 7 px labels: it is drawn at the
 * readable zoom, starting at its top:
 *
 *     fitTransform({ x0: -75, y0: -22, x1: 75, y1: 25 * 84 + 22 }, 810, 800).k === READABLE_K
 */
export function fitTransform(b: Bounds, w: number, h: number): Transform {
  w = Math.max(1, w);
  h = Math.max(1, h);
  const bw = Math.max(NODE_W, b.x1 - b.x0), bh = Math.max(NODE_H, b.y1 - b.y0);
  const whole = Math.min(MAX_K, Math.max(MIN_K, Math.min((w - 40) / bw, (h - 64) / bh)));
  const screens = (bw * READABLE_K * bh * READABLE_K) / (w * h);
  const k = whole >= READABLE_K || screens > OVERVIEW_SCREENS ? whole : READABLE_K;
  // centred across (a graph wider than the screen shows its middle, where a sum of many inputs ends), from the top
  return { tx: (w - (b.x1 - b.x0) * k) / 2 - b.x0 * k, ty: TOP - b.y0 * k, k };
}
