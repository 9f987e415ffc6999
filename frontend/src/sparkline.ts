// A sparkline of one number over a run's steps (a gradient norm, an update/weight ratio): the line, the current
// step marked, NaN/Inf steps ticked in red, and on hover the step and its value. The geometry is pure (unit-tested
// under node); `sparkline` makes the SVG. At most two points per pixel column are drawn (that column's min and
// max), so 10,000 steps cost what 300 do once the data is in.
import { fmt } from "./colors";
import { s } from "./dom";

export interface Series {
  steps: number[];
  values: (number | null)[];
  /** 1 where the value held NaN/Inf (its number is then null). */
  nonfinite?: number[];
}

export interface SparkGeometry {
  scale: "log" | "linear";
  /** The drawn line (SVG path data), "" when no finite value. */
  d: string;
  xOf(step: number): number;
  /** The y of a value (null: not drawable, e.g. <= 0 on a log scale). */
  yOf(v: number | null): number | null;
  lo: number;
  hi: number;
}

/** Values spanning at least this ratio (two decades), all positive, are drawn on a log scale. */
export const LOG_SPAN = 100;
const PAD = 3;

/** Where each point goes in a `w` x `h` box. Log scale when every finite value is > 0 and they span
 * `LOG_SPAN` or more; linear otherwise.
 *
 * sparkGeometry({steps: [0, 1], values: [1, 1000]}, 100, 20).scale === "log" */
export function sparkGeometry(series: Series, w: number, h: number): SparkGeometry {
  const { steps, values } = series;
  let lo = Infinity, hi = -Infinity;
  for (const v of values) {
    if (v === null || !Number.isFinite(v)) continue;
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  const any = lo <= hi;
  const scale: "log" | "linear" = any && lo > 0 && hi / lo >= LOG_SPAN ? "log" : "linear";
  const f = scale === "log" ? Math.log10 : (v: number) => v;
  const flo = any ? f(lo) : 0, fhi = any ? f(hi) : 1;
  const span = fhi - flo || 1;
  const s0 = steps.length ? steps[0] : 0, s1 = steps.length ? steps[steps.length - 1] : 1;
  const sx = (w - 2 * PAD) / ((s1 - s0) || 1);
  const xOf = (step: number) => PAD + (step - s0) * sx;
  const yOf = (v: number | null): number | null => {
    if (v === null || !Number.isFinite(v) || (scale === "log" && v <= 0)) return null;
    // a flat series sits in the middle
    return fhi === flo ? h / 2 : PAD + (h - 2 * PAD) * (1 - (f(v) - flo) / span);
  };
  // one column per pixel: its first, min, max and last y, in step order within the column
  const parts: string[] = [];
  let col = NaN, cmin = 0, cmax = 0, clast = 0, pen = false;
  const flush = () => {
    if (Number.isNaN(col)) return;
    parts.push(`L${col} ${cmin.toFixed(1)}L${col} ${cmax.toFixed(1)}L${col} ${clast.toFixed(1)}`);
  };
  for (let i = 0; i < steps.length; i++) {
    const y = yOf(values[i]);
    if (y === null) { flush(); col = NaN; pen = false; continue; } // a gap where the value is missing
    const x = Math.round(xOf(steps[i]));
    if (x !== col || !pen) {
      flush();
      if (!pen) parts.push(`M${x} ${y.toFixed(1)}`);
      col = x; cmin = cmax = clast = y; pen = true;
    } else {
      if (y < cmin) cmin = y;
      if (y > cmax) cmax = y;
      clast = y;
    }
  }
  flush();
  return { scale, d: parts.join(""), xOf, yOf, lo: any ? lo : NaN, hi: any ? hi : NaN };
}

/** The index of the step nearest `step` in the sorted `steps` (-1 when empty). */
export function nearest(steps: number[], step: number): number {
  if (!steps.length) return -1;
  let a = 0, b = steps.length - 1;
  while (a < b) {
    const m = (a + b) >> 1;
    if (steps[m] < step) a = m + 1; else b = m;
  }
  return a > 0 && step - steps[a - 1] <= steps[a] - step ? a - 1 : a;
}

export interface SparkOptions {
  width: number;
  height: number;
  /** The step shown on the graph (marked), or null. */
  current: number | null;
  /** What the number is ("‖grad‖", "update/weight"), in the hover text. */
  label: string;
}

/** The sparkline's SVG: `path.spark-line`, `line.spark-current` (data-step), `line.spark-bad` per NaN/Inf column,
 * and on hover `text.spark-tip` ("step 12 · ‖grad‖ 0.0213") with `circle.spark-dot`. */
export function sparkline(series: Series, o: SparkOptions): SVGSVGElement {
  const g = sparkGeometry(series, o.width, o.height);
  const svg = s("svg", {
    class: "sparkline", width: o.width, height: o.height + 14, viewBox: `0 0 ${o.width} ${o.height + 14}`,
    "data-scale": g.scale, "data-n": series.steps.length,
  });
  svg.append(s("rect", { class: "spark-bg", x: 0, y: 0, width: o.width, height: o.height }));
  svg.append(s("path", { class: "spark-line", d: g.d }));
  const bad = new Set<number>();
  series.steps.forEach((st, i) => { if (series.nonfinite?.[i]) bad.add(Math.round(g.xOf(st))); });
  for (const x of bad) svg.append(s("line", { class: "spark-bad", x1: x, x2: x, y1: 0, y2: o.height }));
  if (o.current !== null && series.steps.length) {
    const x = g.xOf(o.current).toFixed(1);
    svg.append(s("line", { class: "spark-current", x1: x, x2: x, y1: 0, y2: o.height, "data-step": o.current }));
  }
  const scaleText = g.scale === "log" ? "log scale" : "linear";
  const range = Number.isFinite(g.lo) ? `${fmt(g.lo, 3)} … ${fmt(g.hi, 3)} (${scaleText})` : "no finite value";
  const tip = s("text", { class: "spark-tip", x: 2, y: o.height + 11 }, range);
  const dot = s("circle", { class: "spark-dot", r: 2.5, cx: -10, cy: -10 });
  svg.append(dot, tip);
  svg.addEventListener("mousemove", (e) => {
    const box = svg.getBoundingClientRect();
    const x = ((e.clientX - box.left) / (box.width || 1)) * o.width;
    // invert xOf by the two ends: steps are sorted
    const st = series.steps;
    if (!st.length) return;
    const x0 = g.xOf(st[0]), x1 = g.xOf(st[st.length - 1]);
    const step = st[0] + ((x - x0) / ((x1 - x0) || 1)) * (st[st.length - 1] - st[0]);
    const i = nearest(st, step);
    const v = series.values[i];
    const y = g.yOf(v);
    dot.setAttribute("cx", g.xOf(st[i]).toFixed(1));
    dot.setAttribute("cy", y === null ? "-10" : y.toFixed(1));
    tip.textContent = `step ${st[i]} · ${o.label} ${series.nonfinite?.[i] ? "NaN/Inf" : v === null ? "—" : fmt(v, 4)}`;
    svg.dataset.hover = String(st[i]);
  });
  svg.addEventListener("mouseleave", () => {
    tip.textContent = range;
    dot.setAttribute("cx", "-10");
    delete svg.dataset.hover;
  });
  return svg;
}
