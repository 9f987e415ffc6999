// The SVG graph view. One <g> holds everything and pan/zoom transform only that group. Elements are kept per
// visible id and touched only when what they show changes.
import { ERROR_COLOUR, gradClass, gradColor, gradWidth, fmt, textOn } from "./colors";
import { GRAD_CLASSES } from "./generated/summary";
import { s } from "./dom";
import { params } from "./env";
import type { VEdge, VItem, Visible } from "./groups";
import { NODE_H, NODE_W, segmentRegions, type Placement, type Pos } from "./place";
import type { GNode, Segment, StepGraph } from "./state";
import type { Stats } from "./generated/events";

interface NodeEl extends SVGGElement { _sig?: string; _pos?: string }
interface EdgeEl extends SVGPathElement { _sig?: string }

export function shapeText(shape: number[]): string {
  return `(${shape.join(", ")}${shape.length === 1 ? "," : ""})`;
}

/** The representative gradient of an item: its own, or for a group the most alarming of its members by class
 * (NaN/Inf, then exploding, vanishing, zero, then healthy; the largest norm among equals, the smallest among
 * vanishing ones), with how many members share that class: a group of healthy ops with 144 vanishing bias
 * gradients shows "144 vanishing", not its largest norm. */
export function itemGrad(it: VItem): { grad: Stats | null; computed: number; worst: number } {
  if (it.node) return { grad: it.node.grad, computed: it.node.grad ? 1 : 0, worst: it.node.grad ? 1 : 0 };
  let best: Stats | null = null;
  let bestRank = -1;
  let computed = 0;
  let worst = 0;
  for (const m of it.members) {
    const g = m.grad;
    if (!g) continue;
    computed++;
    const c = gradClass(g);
    const rank = GRAD_CLASSES[c].rank;
    if (rank > bestRank) { best = g; bestRank = rank; worst = 1; continue; }
    if (rank < bestRank) continue;
    worst++;
    const n = g.norm ?? 0, b = best!.norm ?? 0;
    if (c === "vanishing" ? n < b : n > b) best = g;
  }
  return { grad: best, computed, worst };
}

function kindOf(it: VItem): string {
  if (it.type !== "node") return it.type;
  const n = it.node!;
  if (n.isRoot) return "output";
  return n.kind;
}

export class GraphView {
  readonly svg: SVGSVGElement;
  readonly viewport: SVGGElement;
  private segLayer: SVGGElement;
  private edgeLayer: SVGGElement;
  private nodeLayer: SVGGElement;
  private segLabelLayer: SVGGElement;
  private nodes = new Map<string, NodeEl>();
  private edges = new Map<string, EdgeEl>();
  private segs = new Map<number, SVGGElement>();
  private segLabels = new Map<number, SVGTextElement>();
  tx = 40;
  ty = 40;
  k = 1;
  selected: string | null = null;
  focus: string | null = null; // teaching mode's current node
  /** The graph drawn is the capture a graph-cache hit replayed (the hit step recorded none of its own). */
  replayed = false;
  /** Values that have at most this many elements are written on their node: the value, and the gradient with
   * its sign (micrograd's data / grad), instead of the shape and the gradient's norm. 0: never. */
  numbersUpTo = Number(params.get("numbers") ?? 1);
  onSelect: (vid: string, item: VItem) => void = () => {};
  onToggle: (item: VItem) => void = () => {};
  /** The user panned or zoomed (the page stops fitting the graph for them). */
  onUserMove: () => void = () => {};
  private lastVisible: Visible | null = null;
  /** The search's matches (visible ids), or null when there is no search; `filtered`: hide the rest. */
  private marked: Set<string> | null = null;
  private filtered = false;
  /** The selection's paths (paths.ts): its own items, its path to the loss and its inputs' cone. */
  private path: { src: Set<string>; down: Set<string> | null; up: Set<string> | null } | null = null;
  /** The step diff's marks (diff.ts): visible id -> its classes; null when no diff is shown. */
  private diffMarks: Map<string, string> | null = null;

  constructor(container: HTMLElement) {
    this.svg = s("svg", { id: "graph", role: "img", "aria-label": "computation graph" });
    const defs = s("defs");
    const marker = s("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 9, markerHeight: 9, markerUnits: "userSpaceOnUse", orient: "auto-start-reverse" });
    marker.append(s("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: "#8a8f98" }));
    defs.append(marker);
    this.viewport = s("g", { id: "viewport" });
    this.segLayer = s("g", { class: "segments" });
    this.edgeLayer = s("g", { class: "edges" });
    this.nodeLayer = s("g", { class: "nodes" });
    this.segLabelLayer = s("g", { class: "segment-labels" }); // above edges, so edges never hide a label
    this.viewport.append(this.segLayer, this.edgeLayer, this.nodeLayer, this.segLabelLayer);
    this.svg.append(defs, this.viewport);
    container.append(this.svg);
    this.applyTransform();
    this.attachPanZoom();
    this.nodeLayer.addEventListener("click", (e) => {
      const el = (e.target as Element).closest("g.vnode") as NodeEl | null;
      if (!el || !this.lastVisible) return;
      const it = this.lastVisible.items.get(el.dataset.vid!);
      if (it) this.onSelect(it.vid, it);
    });
    this.nodeLayer.addEventListener("dblclick", (e) => {
      const el = (e.target as Element).closest("g.vnode") as NodeEl | null;
      if (!el || !this.lastVisible) return;
      const it = this.lastVisible.items.get(el.dataset.vid!);
      if (it && it.type !== "node") this.onToggle(it);
    });
  }

  setTransform(tx: number, ty: number, k: number): void {
    this.tx = tx; this.ty = ty; this.k = k;
    this.applyTransform();
  }

  private applyTransform(): void {
    const far = this.k < 0.35;
    if (far !== this.svg.classList.contains("far")) this.svg.classList.toggle("far", far);
    this.viewport.setAttribute("transform", `translate(${this.tx.toFixed(1)},${this.ty.toFixed(1)}) scale(${this.k.toFixed(4)})`);
  }

  private attachPanZoom(): void {
    let drag: { x: number; y: number; tx: number; ty: number } | null = null;
    this.svg.addEventListener("pointerdown", (e) => {
      if ((e.target as Element).closest("g.vnode")) return;
      drag = { x: e.clientX, y: e.clientY, tx: this.tx, ty: this.ty };
      this.onUserMove();
      this.svg.setPointerCapture(e.pointerId);
      this.svg.classList.add("panning");
    });
    this.svg.addEventListener("pointermove", (e) => {
      if (!drag) return;
      this.setTransform(drag.tx + e.clientX - drag.x, drag.ty + e.clientY - drag.y, this.k);
    });
    const end = () => { drag = null; this.svg.classList.remove("panning"); };
    this.svg.addEventListener("pointerup", end);
    this.svg.addEventListener("pointercancel", end);
    this.svg.addEventListener("wheel", (e) => {
      e.preventDefault();
      this.onUserMove();
      const r = this.svg.getBoundingClientRect();
      const mx = e.clientX - r.left, my = e.clientY - r.top;
      const k2 = Math.min(3, Math.max(0.05, this.k * Math.exp(-e.deltaY * 0.0015)));
      this.setTransform(mx - ((mx - this.tx) * k2) / this.k, my - ((my - this.ty) * k2) / this.k, k2);
    }, { passive: false });
  }

  /** The drawing's size on screen, kept by a ResizeObserver: reading it from the element (getBoundingClientRect)
   * right after thousands of new nodes forces the browser to lay them all out there and then (measured: more than
   * half of an "expand all" of 2,500 nodes), before the frame that lays them out anyway. */
  private size: { w: number; h: number } | null = null;

  private screenSize(): { w: number; h: number } {
    if (!this.size) {
      const r = this.svg.getBoundingClientRect();
      this.size = { w: r.width, h: r.height };
      new ResizeObserver((es) => {
        const c = es[es.length - 1].contentRect;
        this.size = { w: c.width, h: c.height };
      }).observe(this.svg);
    }
    return this.size;
  }

  /** Highlight the search's matches and dim the rest (or hide it, `filter`); null clears the marks. Touches
   * classes only, not the drawing, so that a keystroke over thousands of nodes stays cheap. */
  mark(vids: Set<string> | null, filter: boolean): void {
    this.marked = vids;
    this.filtered = filter && vids !== null;
    this.applyMarks();
  }

  private applyMarks(): void {
    const m = this.marked;
    this.svg.classList.toggle("searching", m !== null);
    this.svg.classList.toggle("filtered", this.filtered);
    // only "match" is set per element, the dimming of the rest follows from the svg's class (style.css): a
    // keystroke that changes few matches changes few elements
    for (const [vid, el] of this.nodes) el.classList.toggle("match", m !== null && m.has(vid));
    for (const el of this.edges.values()) {
      el.classList.toggle("match", m !== null && m.has(el.dataset.from!) && m.has(el.dataset.to!));
    }
  }

  /** Mark the selection's path to the loss (`down`) and its inputs' cone (`up`); the rest is dimmed. null
   * `src` clears the marks. An edge is on a path when both its ends are (or are the selection). */
  markPaths(src: Set<string> | null, down: Set<string> | null, up: Set<string> | null): void {
    this.path = src ? { src, down, up } : null;
    this.applyPaths();
  }

  private applyPaths(): void {
    const p = this.path;
    this.svg.classList.toggle("pathing", p !== null);
    const inDown = (v: string) => !!p && (p.down?.has(v) ?? false);
    const inUp = (v: string) => !!p && (p.up?.has(v) ?? false);
    for (const [vid, el] of this.nodes) {
      el.classList.toggle("path-src", !!p && p.src.has(vid));
      el.classList.toggle("path-down", inDown(vid));
      el.classList.toggle("path-up", inUp(vid));
    }
    for (const el of this.edges.values()) {
      const a = el.dataset.from!, b = el.dataset.to!;
      const src = (v: string) => !!p && p.src.has(v);
      el.classList.toggle("path-down", (src(a) || inDown(a)) && inDown(b));
      el.classList.toggle("path-up", inUp(a) && (src(b) || inUp(b)));
    }
  }

  /** Mark the step diff's nodes (visible id -> its classes, of "diff-added diff-reshaped diff-jumped"); null
   * clears. */
  markDiff(marks: Map<string, string> | null): void {
    this.diffMarks = marks;
    this.applyDiff();
  }

  private applyDiff(): void {
    const m = this.diffMarks;
    this.svg.classList.toggle("diffing", m !== null);
    for (const [vid, el] of this.nodes) {
      const c = m?.get(vid)?.split(" ") ?? [];
      for (const k of ["diff-added", "diff-reshaped", "diff-jumped"]) el.classList.toggle(k, c.includes(k));
    }
  }

  /** Centre the view on a point of the drawing, keeping the zoom (at least readable: labels show from 0.35). */
  centre(p: Pos): void {
    const r = this.screenSize();
    const k = Math.max(this.k, 0.6);
    this.setTransform(r.w / 2 - p.x * k, r.h / 2 - p.y * k, k);
  }

  fit(b: { x0: number; y0: number; x1: number; y1: number }): void {
    const r = this.screenSize();
    const w = Math.max(1, r.w), hh = Math.max(1, r.h);
    const k = Math.min(1.2, Math.max(0.05, Math.min((w - 40) / (b.x1 - b.x0), (hh - 64) / (b.y1 - b.y0))));
    this.setTransform((w - (b.x1 - b.x0) * k) / 2 - b.x0 * k, 44 - b.y0 * k, k);
  }

  /** Draw `v` at the positions in `place`. */
  render(v: Visible, place: Placement, graph: StepGraph | null): void {
    this.lastVisible = v;
    const seen = new Set<string>();
    for (const it of v.items.values()) {
      const p = place.pos.get(it.vid);
      if (!p) continue;
      seen.add(it.vid);
      this.drawNode(it, p);
    }
    for (const [vid, el] of this.nodes) if (!seen.has(vid)) { el.remove(); this.nodes.delete(vid); }
    // the bottom of each checkpoint node's recomputed column: its other edges leave below it (see drawEdge)
    const columnBottom = new Map<string, number>();
    for (const it of v.items.values()) {
      const p = it.anchor ? place.pos.get(it.vid) : undefined;
      if (p) columnBottom.set(it.anchor!, Math.max(columnBottom.get(it.anchor!) ?? -Infinity, p.y + NODE_H / 2));
    }
    const eseen = new Set<string>();
    for (const e of v.edges) {
      const a = place.pos.get(e.from), b = place.pos.get(e.to);
      if (!a || !b) continue;
      const id = `${e.from}\u0000${e.to}`;
      eseen.add(id);
      const below = v.items.get(e.to)?.anchor === e.from ? undefined : columnBottom.get(e.from);
      this.drawEdge(id, e, a, b, below);
    }
    for (const [id, el] of this.edges) if (!eseen.has(id)) { el.remove(); this.edges.delete(id); }
    this.drawSegments(v, place, graph);
    if (this.marked) this.applyMarks(); // nodes drawn anew got their class from drawNode, without the marks
    if (this.path) this.applyPaths();
    if (this.diffMarks) this.applyDiff();
  }

  private drawNode(it: VItem, p: Pos): void {
    const { grad, computed, worst } = itemGrad(it);
    const gc = gradClass(grad);
    const kind = kindOf(it);
    const n = it.node;
    const flags: string[] = [];
    if (n?.origin) flags.push("origin");
    if (n?.anomaly) flags.push("anomaly");
    if (n?.error) flags.push("error");
    if (n?.recomputed) flags.push("recomputed");
    if (n?.segment) flags.push("checkpointed");
    if (this.replayed) flags.push("replayed");
    const cls = `vnode kind-${kind} grad-${gc}${it.ghost ? " ghost" : ""}${this.selected === it.vid ? " selected" : ""}` +
      `${this.focus === it.vid ? " focus" : ""}${flags.map((f) => " " + f).join("")}`;
    const title = n ? nodeTitle(n) : it.label;
    const numel = n ? n.shape.reduce((a, b) => a * b, 1) : Infinity;
    const numbers = !!n && numel <= this.numbersUpTo;
    const data = numbers && n.values && n.values.length === numel ? `data ${numbersText(n.values)}` : null;
    const gvals = numbers && grad?.values && grad.values.length === numel ? `grad ${numbersText(grad.values)}` : null;
    const sub = n ? data ?? shapeText(n.shape) : `${it.count} nodes${it.type === "group" ? " ▸" : ""}`;
    // "none" has no word: no badge; a backward that raised here says so whatever gradient arrived before
    // a group flags how many of its members are in its worst class
    const word = GRAD_CLASSES[gc].word;
    const badge = n?.error ? "error" : gvals && (gc === "ok" || gc === "zero") ? gvals :
      gc === "ok" ? `‖g‖ ${fmt(grad!.norm, 2)}` : !n && word ? `${worst} ${word}` : word;
    const colour = gradColor(grad);
    const badgeColour = n?.error ? ERROR_COLOUR : colour;
    const sig = `${cls}|${title}|${sub}|${badge}|${colour}|${it.type === "node" ? "" : computed}`;
    const posKey = `${p.x},${p.y}`;
    let el = this.nodes.get(it.vid);
    if (!el) {
      el = s("g", {}) as NodeEl;
      el.dataset.vid = it.vid;
      this.nodeLayer.append(el);
      this.nodes.set(it.vid, el);
    }
    if (el._pos !== posKey) {
      el.setAttribute("transform", `translate(${p.x - NODE_W / 2},${p.y - NODE_H / 2})`);
      el._pos = posKey;
    }
    if (el._sig === sig) return;
    el._sig = sig;
    el.setAttribute("class", cls);
    el.dataset.gradClass = gc;
    el.dataset.gradColor = colour;
    el.dataset.kind = kind;
    if (n) el.dataset.key = n.key; else delete el.dataset.key;
    while (el.firstChild) el.removeChild(el.firstChild);
    el.append(s("rect", {
      class: "body", width: NODE_W, height: NODE_H, rx: n && n.kind !== "op" ? 20 : 6,
      stroke: colour, "stroke-width": gc === "none" ? 1.5 : Math.min(5, gradWidth(grad)),
      "stroke-dasharray": gc === "none" ? "5 4" : null,
    }));
    if (it.type !== "node") el.append(s("rect", { class: "stack", x: 4, y: -4, width: NODE_W, height: NODE_H, rx: 6 }));
    if (n?.recomputed) el.append(s("rect", { class: "rc-ring", x: -4, y: -4, width: NODE_W + 8, height: NODE_H + 8, rx: 9 }));
    const t1 = s("text", { class: "l1", x: NODE_W / 2, y: 17 }, n && n.kind !== "op" && n.name ? clipLeft(title, 21) : clip(title, 21));
    const t2 = s("text", { class: "l2", x: NODE_W / 2, y: 33 }, clip(sub, 26));
    if (numbers) el.dataset.numbers = "1"; else delete el.dataset.numbers;
    const tip = n?.recomputed ? `${title} ${sub}: recomputed in backward (checkpoint segment #${n.segment})` : `${title} ${sub}`;
    el.append(t1, t2, s("title", {}, tip));
    if (badge) {
      // above the node's top edge, so it never sits on the title
      const bc = n?.error ? "error" : gc;
      const bw = Math.min(NODE_W + 4, Math.max(70, badge.length * 6.2 + 10)); // numbers may need more room
      el.append(s("rect", { class: `badge badge-${bc}`, x: NODE_W + 4 - bw, y: -15, width: bw, height: 14, rx: 7, fill: badgeColour }));
      const txt = s("text", { class: `badge-text badge-${bc}`, x: NODE_W + 4 - bw / 2, y: -4.5 }, clip(badge, 24));
      txt.style.fill = textOn(badgeColour); // readable on every ramp colour (dark purple to yellow)
      el.append(txt);
    }
    if (it.type !== "node" && it.count) {
      el.append(s("text", { class: "grad-count", x: 6, y: NODE_H + 12 }, computed ? `${computed}/${it.count} grads` : ""));
    }
  }

  /** `below`: the source is a checkpoint node with its recomputed column beside it; the edge runs straight down
   * to the column's bottom first, so it visibly comes from the checkpoint node, not from the column's last node. */
  private drawEdge(id: string, e: VEdge, a: Pos, b: Pos, below?: number): void {
    const gc = gradClass(e.grad);
    const colour = gradColor(e.grad);
    const w = gradWidth(e.grad);
    const x1 = a.x, x2 = b.x, y2 = b.y - NODE_H / 2 - 2;
    let y1 = a.y + NODE_H / 2;
    let start = "";
    if (below !== undefined && below + 8 < y2) {
      start = `M${x1},${y1} L${x1},${below + 8} `;
      y1 = below + 8;
    }
    const dy = Math.max(20, (y2 - y1) / 2);
    const d = `${start || `M${x1},${y1} `}C${x1},${y1 + dy} ${x2},${y2 - dy} ${x2},${y2}`;
    const rc = !!e.recompute;
    const sig = `${d}|${colour}|${w}|${gc}|${e.ghost}|${rc}`;
    let el = this.edges.get(id);
    if (!el) {
      el = s("path", { "marker-end": "url(#arrow)" }) as EdgeEl;
      el.dataset.from = e.from;
      el.dataset.to = e.to;
      this.edgeLayer.append(el);
      this.edges.set(id, el);
    }
    if (el._sig === sig) return;
    el._sig = sig;
    el.setAttribute("d", d);
    el.setAttribute("class", `edge grad-${gc}${e.ghost ? " ghost" : ""}${rc ? " recompute" : ""}`);
    el.setAttribute("stroke", colour);
    el.setAttribute("stroke-width", w.toFixed(2));
    if (gc === "none") el.setAttribute("stroke-dasharray", "4 4"); else el.removeAttribute("stroke-dasharray");
    el.dataset.gradClass = gc;
  }

  private drawSegments(v: Visible, place: Placement, graph: StepGraph | null): void {
    const segs = new Map<number, Segment>();
    for (const seg of graph ? graph.segments : []) segs.set(seg.ordinal, seg);
    const keep = new Set<number>();
    for (const r of segmentRegions(v, place.pos)) {
      const seg = segs.get(r.ordinal);
      if (!seg) continue;
      keep.add(r.ordinal);
      let el = this.segs.get(r.ordinal);
      if (!el) {
        el = s("g", {});
        this.segLayer.append(el);
        this.segs.set(r.ordinal, el);
      }
      const boxed = r.rects.length === 1;
      el.setAttribute("class", `segment state-${seg.state}${boxed ? " boxed" : " pieces"}`);
      el.dataset.segment = String(r.ordinal);
      el.dataset.state = seg.state;
      el.dataset.members = r.members.join("\n");
      while (el.firstChild) el.removeChild(el.firstChild);
      const shade = s("g", { class: "shade" });
      for (const b of r.rects) shade.append(s("rect", { x: b.x0, y: b.y0, width: b.x1 - b.x0, height: b.y1 - b.y0, rx: 12 }));
      el.append(shade);
      let lab = this.segLabels.get(r.ordinal);
      if (!lab) {
        lab = s("text", { class: "segment-label" });
        this.segLabelLayer.append(lab);
        this.segLabels.set(r.ordinal, lab);
      }
      lab.setAttribute("x", String(r.label.x));
      lab.setAttribute("y", String(r.label.y));
      lab.dataset.segment = String(r.ordinal);
      lab.setAttribute("class", `segment-label state-${seg.state}`);
      lab.textContent = `checkpoint #${seg.ordinal} · ${segmentName(seg.name)} · ${segmentLabel(seg)}`;
    }
    for (const [o, el] of this.segs) if (!keep.has(o)) { el.remove(); this.segs.delete(o); }
    for (const [o, el] of this.segLabels) if (!keep.has(o)) { el.remove(); this.segLabels.delete(o); }
  }

  nodeCount(): number {
    return this.nodes.size;
  }
}

/** A segment's name as a reader takes it: checkpoint_sequential names its segments "layers[2]", which reads like
 * an index; it means a segment of 2 layers. */
export function segmentName(name: string): string {
  const m = /^layers\[(\d+)\]$/.exec(name);
  return m ? `${m[1]} layer${m[1] === "1" ? "" : "s"}` : name;
}

/** What a segment's shading says about it, by state. */
export function segmentLabel(seg: Segment): string {
  switch (seg.state) {
    case "forward": return "running, activations not kept";
    case "saved": return `activations dropped (${seg.ops} ops)`;
    case "recomputing": return "↻ recomputing…";
    default: return `↻ recomputed (${seg.ops} ops)`;
  }
}

/** Values on a node: a number, or a short list "[0.5, -1]". */
export function numbersText(vals: (number | null)[]): string {
  const one = (v: number | null) => (v === null ? "NaN/Inf" : fmt(v, 4));
  return vals.length === 1 ? one(vals[0]) : `[${vals.map(one).join(", ")}]`;
}

/** A node's first label line: op name (↻ marks a recomputation), a leaf's name, or what an unnamed leaf is. */
export function nodeTitle(n: GNode): string {
  if (n.kind === "op") return n.recomputed ? `↻ ${n.op}` : n.op;
  if (n.name) return n.name.startsWith("model.") ? n.name.slice(6) : n.name;
  return n.kind === "const" ? "data / constant" : n.kind;
}

/** Keep the end of a long dotted name ("…blocks.1.0.weight"): the end says what it is. */
function clipLeft(t: string, n: number): string {
  return t.length > n ? "…" + t.slice(t.length - n + 1) : t;
}

function clip(t: string, n: number): string {
  return t.length > n ? t.slice(0, n - 1) + "…" : t;
}

/** The graph as shown, as a standalone SVG document: the whole visible graph (not just the part in view), its
 * styles inlined (the page's stylesheet rules for the graph), labels shown whatever the zoom. */
export function svgDocument(svg: SVGSVGElement, b: { x0: number; y0: number; x1: number; y1: number }, title: string): string {
  const clone = svg.cloneNode(true) as SVGSVGElement;
  const pad = 30;
  const x0 = b.x0 - pad, y0 = b.y0 - pad - 30, w = b.x1 - b.x0 + 2 * pad, hh = b.y1 - b.y0 + 2 * pad + 30;
  clone.setAttribute("xmlns", "http://www.w3.org/2000/svg");
  clone.setAttribute("viewBox", `${x0} ${y0} ${w} ${hh}`);
  clone.setAttribute("width", String(Math.round(w)));
  clone.setAttribute("height", String(Math.round(hh)));
  clone.classList.remove("far", "panning");
  clone.removeAttribute("id");
  clone.querySelector("#viewport")?.removeAttribute("transform");
  const css: string[] = ["svg { font-family: system-ui, sans-serif; background: #fff; }"];
  for (const sheet of Array.from(document.styleSheets)) {
    let rules: CSSRuleList;
    try { rules = sheet.cssRules; } catch { continue; }
    for (const r of Array.from(rules)) {
      const sel = (r as CSSStyleRule).selectorText;
      if (sel && /vnode|segment|edge|badge|rc-ring/.test(sel) && !/\.far\b/.test(sel)) css.push(r.cssText);
    }
  }
  const style = document.createElementNS("http://www.w3.org/2000/svg", "style");
  style.textContent = css.join("\n").replace(/svg#graph/g, "svg");
  clone.insertBefore(style, clone.firstChild);
  const t = document.createElementNS("http://www.w3.org/2000/svg", "title");
  t.textContent = title;
  clone.insertBefore(t, clone.firstChild);
  return '<?xml version="1.0" encoding="UTF-8"?>\n' + new XMLSerializer().serializeToString(clone);
}
