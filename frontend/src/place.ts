// Incremental layered placement: each visible item gets a row one below its lowest input and a column near the
// mean of its inputs' columns, at the first free slot. A placed item never moves (until a full layout from the
// worker replaces every position at once), so the picture stays still while a graph streams in.
import type { Visible } from "./groups";

export const NODE_W = 150;
export const NODE_H = 44;
export const COL = 170; // column pitch
export const ROW = 84; // row pitch

export interface Pos {
  x: number; // centre
  y: number;
}

export class Placement {
  readonly pos = new Map<string, Pos>();

  /** Give a position to every visible item without one; returns how many were placed. */
  place(v: Visible): number {
    const preds = new Map<string, string[]>();
    for (const e of v.edges) {
      let l = preds.get(e.to);
      if (!l) preds.set(e.to, (l = []));
      l.push(e.from);
    }
    // occupied columns per row, from what is visible now
    const rows = new Map<number, Set<number>>();
    const occupy = (p: Pos) => {
      const r = Math.round(p.y / ROW);
      let s = rows.get(r);
      if (!s) rows.set(r, (s = new Set()));
      s.add(Math.round(p.x / COL));
    };
    const todo: string[] = [];
    for (const it of v.items.values()) {
      const p = this.pos.get(it.vid);
      if (p) occupy(p);
      else todo.push(it.vid);
    }
    todo.sort((a, b) => v.items.get(a)!.order - v.items.get(b)!.order);
    const succs = new Map<string, string[]>();
    for (const e of v.edges) {
      let l = succs.get(e.from);
      if (!l) succs.set(e.from, (l = []));
      l.push(e.to);
    }
    // items with inputs first, then sources (parameters, inputs) just above their first consumer: a parameter
    // used deep in the graph sits next to its use instead of in a row 0 far away (long edges are costly to draw)
    const sources = todo.filter((vid) => !(preds.get(vid) ?? []).some((f) => v.items.has(f)));
    const inner = todo.filter((vid) => (preds.get(vid) ?? []).some((f) => v.items.has(f)));
    let placed = 0;
    const put = (vid: string, row: number, want: number) => {
      const used = rows.get(row) ?? new Set<number>();
      let col = want;
      for (let d = 0; ; d++) {
        if (!used.has(want + d)) { col = want + d; break; }
        if (d > 0 && !used.has(want - d)) { col = want - d; break; }
      }
      const p = { x: col * COL, y: row * ROW };
      this.pos.set(vid, p);
      occupy(p);
      placed++;
    };
    for (const vid of inner) {
      let row = 0;
      let sum = 0;
      let k = 0;
      for (const f of preds.get(vid) ?? []) {
        const q = this.pos.get(f);
        if (!q || !v.items.has(f)) continue;
        row = Math.max(row, Math.round(q.y / ROW) + 1);
        sum += q.x / COL;
        k++;
      }
      put(vid, row, k ? Math.round(sum / k) : 0);
    }
    for (const vid of sources) {
      let row = Infinity;
      let want = 0;
      for (const t of succs.get(vid) ?? []) {
        const q = this.pos.get(t);
        if (!q || !v.items.has(t)) continue;
        const r = Math.round(q.y / ROW) - 1;
        if (r < row) { row = r; want = Math.round(q.x / COL); }
      }
      put(vid, row === Infinity ? 0 : row, want);
    }
    return placed;
  }

  /** Adopt a full layout (from the worker): positions for the given ids replace the old ones. */
  adopt(layout: Record<string, Pos>): void {
    for (const [vid, p] of Object.entries(layout)) this.pos.set(vid, p);
  }

  bounds(v: Visible): { x0: number; y0: number; x1: number; y1: number } {
    let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
    for (const vid of v.items.keys()) {
      const p = this.pos.get(vid);
      if (!p) continue;
      x0 = Math.min(x0, p.x - NODE_W / 2); x1 = Math.max(x1, p.x + NODE_W / 2);
      y0 = Math.min(y0, p.y - NODE_H / 2); y1 = Math.max(y1, p.y + NODE_H / 2);
    }
    if (x0 === Infinity) return { x0: 0, y0: 0, x1: 1, y1: 1 };
    return { x0, y0, x1, y1 };
  }
}

/** A signature of the visible structure: a full layout is worth asking for only when it changes. */
export function structureSig(v: Visible): string {
  const ids = [...v.items.keys()].sort();
  const es = v.edges.map((e) => `${e.from}>${e.to}`).sort();
  return `${ids.length}|${es.length}|${hash(ids.join("\n") + "\n" + es.join("\n"))}`;
}

function hash(s: string): string {
  let h = 2166136261;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 16777619);
  return (h >>> 0).toString(36);
}
