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
    // a recomputed node goes beside its checkpoint node (to the right, never left of it), a chain of them going
    // down: the recomputation reads as part of the segment, not as a second copy of the forward graph
    const putAnchored = (vid: string, anchor: Pos): void => {
      let row = Math.round(anchor.y / ROW);
      for (const f of preds.get(vid) ?? []) {
        const fi = v.items.get(f);
        const q = this.pos.get(f);
        if (q && fi && fi.anchor === v.items.get(vid)!.anchor) row = Math.max(row, Math.round(q.y / ROW) + 1);
      }
      const used = rows.get(row) ?? new Set<number>();
      let col = Math.round(anchor.x / COL) + 1;
      while (used.has(col)) col++;
      const p = { x: col * COL, y: row * ROW };
      this.pos.set(vid, p);
      occupy(p);
      placed++;
    };
    for (const vid of inner) {
      const a = v.items.get(vid)!.anchor;
      const ap = a ? this.pos.get(a) : undefined;
      if (ap) { putAnchored(vid, ap); continue; }
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

/** Vertical pitch of a recomputed chain beside its checkpoint node (tighter than ROW: no edges between rows). */
export const RC_ROW = 64;
export const RC_DX = NODE_W + 24; // a recomputed chain's column, right of its checkpoint node

/** Recomputed items per checkpoint item (their anchor), each with its row in the chain (0: beside the anchor),
 * from the longest path through anchored inputs. Items come in stream order, which is topological. */
export function anchoredChains(v: Visible): Map<string, { vid: string; row: number }[]> {
  const out = new Map<string, { vid: string; row: number }[]>();
  const rowOf = new Map<string, number>();
  const preds = new Map<string, string[]>();
  for (const e of v.edges) {
    let l = preds.get(e.to);
    if (!l) preds.set(e.to, (l = []));
    l.push(e.from);
  }
  const items = [...v.items.values()].filter((it) => it.anchor && v.items.has(it.anchor)).sort((a, b) => a.order - b.order);
  for (const it of items) {
    let row = 0;
    for (const f of preds.get(it.vid) ?? []) {
      const r = rowOf.get(f);
      if (r !== undefined && v.items.get(f)!.anchor === it.anchor) row = Math.max(row, r + 1);
    }
    rowOf.set(it.vid, row);
    let l = out.get(it.anchor!);
    if (!l) out.set(it.anchor!, (l = []));
    l.push({ vid: it.vid, row });
  }
  return out;
}

/** What the full layout (dagre) gets: a checkpoint node with recomputed nodes becomes one larger box (the node
 * and, to its right, its recomputed chain), so the layout keeps the segment together and compact. */
export function layoutInput(v: Visible, w = NODE_W, hgt = NODE_H): {
  nodes: { id: string; w: number; h: number }[]; edges: { from: string; to: string }[]; chains: Map<string, { vid: string; row: number }[]>;
} {
  const chains = anchoredChains(v);
  const host = new Map<string, string>();
  for (const [a, chain] of chains) for (const c of chain) host.set(c.vid, a);
  const nodes: { id: string; w: number; h: number }[] = [];
  for (const vid of v.items.keys()) {
    if (host.has(vid)) continue;
    const chain = chains.get(vid);
    const rows = chain ? Math.max(...chain.map((c) => c.row)) : 0;
    nodes.push(chain ? { id: vid, w: RC_DX + w, h: hgt + rows * RC_ROW } : { id: vid, w, h: hgt });
  }
  const seen = new Set<string>();
  const edges: { from: string; to: string }[] = [];
  for (const e of v.edges) {
    const from = host.get(e.from) ?? e.from, to = host.get(e.to) ?? e.to;
    const id = `${from}\u0000${to}`;
    if (from === to || seen.has(id)) continue;
    seen.add(id);
    edges.push({ from, to });
  }
  return { nodes, edges, chains };
}

/** Positions of every item from the layout of `layoutInput`'s boxes (centres): an enlarged checkpoint box puts
 * its node at the top left and its recomputed chain in the right column. */
export function expandLayout(boxes: Record<string, Pos>, chains: Map<string, { vid: string; row: number }[]>): Record<string, Pos> {
  const out: Record<string, Pos> = { ...boxes };
  for (const [a, chain] of chains) {
    const b = boxes[a];
    if (!b) continue;
    const rows = Math.max(...chain.map((c) => c.row));
    const left = b.x - (RC_DX + NODE_W) / 2, top = b.y - (NODE_H + rows * RC_ROW) / 2;
    out[a] = { x: left + NODE_W / 2, y: top + NODE_H / 2 };
    for (const c of chain) out[c.vid] = { x: left + RC_DX + NODE_W / 2, y: top + NODE_H / 2 + c.row * RC_ROW };
  }
  return out;
}

export interface Rect { x0: number; y0: number; x1: number; y1: number }

/** Padding of a segment's shading around its nodes: room above for gradient badges, below for the label (edges
 * come in from above, so a label at the bottom stays readable). */
export const SEG_PAD = { x: 14, top: 22, bottom: 30 };

export interface SegmentRegion {
  ordinal: number;
  members: string[]; // visible ids inside the segment
  rects: Rect[]; // one bounding rect, or one per member when the bounding rect would cover other nodes
  label: { x: number; y: number };
}

/** Visible ids per checkpoint segment ordinal (an item belongs when it, or a member of its group, does). */
export function segmentMembers(v: Visible): Map<number, string[]> {
  const out = new Map<number, string[]>();
  for (const it of v.items.values()) {
    const ords = new Set<number>();
    if (it.node?.segment) ords.add(it.node.segment);
    for (const m of it.members) if (m.segment) ords.add(m.segment);
    for (const o of ords) {
      let l = out.get(o);
      if (!l) out.set(o, (l = []));
      l.push(it.vid);
    }
  }
  return out;
}

const overlaps = (a: Rect, b: Rect): boolean => a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1;

/** The shading of each segment: the box around its members, unless that box would cover a node outside the
 * segment (the layout put one in between); then one padded rect per member, which never covers another node. */
export function segmentRegions(v: Visible, pos: Map<string, Pos>): SegmentRegion[] {
  const out: SegmentRegion[] = [];
  const nodeRect = (p: Pos): Rect => ({ x0: p.x - NODE_W / 2, y0: p.y - NODE_H / 2 - 10, x1: p.x + NODE_W / 2, y1: p.y + NODE_H / 2 });
  for (const [ordinal, vids] of segmentMembers(v)) {
    const inside = new Set<string>();
    const pts: Pos[] = [];
    for (const vid of vids) {
      const p = pos.get(vid);
      if (p) { inside.add(vid); pts.push(p); }
    }
    if (!pts.length) continue;
    const box: Rect = { x0: Infinity, y0: Infinity, x1: -Infinity, y1: -Infinity };
    for (const p of pts) {
      box.x0 = Math.min(box.x0, p.x - NODE_W / 2 - SEG_PAD.x); box.x1 = Math.max(box.x1, p.x + NODE_W / 2 + SEG_PAD.x);
      box.y0 = Math.min(box.y0, p.y - NODE_H / 2 - SEG_PAD.top); box.y1 = Math.max(box.y1, p.y + NODE_H / 2 + SEG_PAD.bottom);
    }
    let intruded = false;
    for (const vid of v.items.keys()) {
      if (inside.has(vid)) continue;
      const p = pos.get(vid);
      if (p && overlaps(nodeRect(p), box)) { intruded = true; break; }
    }
    let rects: Rect[] = [box];
    if (intruded) {
      const px = Math.min(SEG_PAD.x, (COL - NODE_W) / 2);
      rects = pts.map((p) => ({ x0: p.x - NODE_W / 2 - px, y0: p.y - NODE_H / 2 - SEG_PAD.top, x1: p.x + NODE_W / 2 + px, y1: p.y + NODE_H / 2 + SEG_PAD.bottom }));
    }
    const last = rects.reduce((a, b) => (b.y1 > a.y1 || (b.y1 === a.y1 && b.x0 < a.x0) ? b : a));
    out.push({ ordinal, members: [...inside], rects, label: { x: last.x0 + 10, y: last.y1 - 10 } });
  }
  return out;
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
