// The SVG graph view. One <g> holds everything and pan/zoom transform only that group. Elements are kept per
// visible id and touched only when what they show changes.
import { ERROR_COLOUR, gradClass, gradColor, gradWidth, fmt, textOn } from "./colors";
import { GRAD_CLASSES } from "./generated/summary";
import { s } from "./dom";
import { CULL_MIN_ITEMS, edgeNear, nearWindow, nodeNear, viewInside } from "./cull";
import { fitTransform, type Bounds } from "./fit";
import { drawNodeParts, newNodeEl, type PartsHolder } from "./nodeel";
import { params } from "./env";
import type { VEdge, VItem, Visible } from "./groups";
import { NODE_H, NODE_W, segmentRegions, type Placement, type Pos } from "./place";
import { bytesText, segmentMemory } from "./saved";
import type { GNode, Segment, StepGraph } from "./state";
import type { Stats } from "./generated/events";

interface NodeEl extends PartsHolder { _sig?: string; _pos?: string; _detail?: boolean }

/** Below this zoom the view is "far": labels would be under 5 px (style.css hides them), so a node is drawn as
 * its outline only, and its labels, badge and tooltip are built when the view comes nearer (detail on demand):
 * an "expand all" of 2,500 nodes lands at an overview zoom, and building ~7 elements per node there was most of
 * its time. */
export const FAR_K = 0.35;
interface EdgeEl extends SVGPathElement { _sig?: string; _d?: string }
interface LabelEl extends SVGTextElement { _sig?: string }

/** Edge labels (the tensor's shape) are on by default up to this many visible items. */
export const EDGE_SHAPES_AUTO_MAX = 200;
const LABEL_H = 12, LABEL_CELL = 64;
/** Above this many matches the search draws only the dim's holes: no ring and no edges redrawn (with most of the
 * graph matching they would say nothing the holes do not, and each is a path of thousands of pieces to parse and
 * raster on the keystroke: "l" matches nearly all of a 5,000-node graph). */
export const MARK_DETAIL_MAX = 2000;

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
  private edgeLabelLayer: SVGGElement;
  private edgeLabels = new Map<string, LabelEl>();
  /** The search's marks, drawn in a second, small SVG over the graph (see drawMarkOverlay). */
  private markSvg: SVGSVGElement;
  private markViewport: SVGGElement;
  private dimPath: SVGPathElement;
  private ringPath: SVGPathElement;
  private matchEdgePath: SVGPathElement;
  /** Nodes and edges carry the "match" class (the filter hides the rest by it). */
  private classMarked = false;
  private lastPos: Map<string, Pos> = new Map();
  /** Shapes on edges: true/false by the user; null: on for small graphs (EDGE_SHAPES_AUTO_MAX). */
  edgeShapes: boolean | null = null;
  /** Saved-for-backward bytes per item, drawn as a badge under each node (null: not shown). */
  savedBytesOf: ((it: VItem) => number) | null = null;
  /** The transform changed (the minimap follows), and a render finished (it draws the overview again). */
  onTransform: () => void = () => {};
  onRender: (v: Visible, pos: Map<string, Pos>) => void = () => {};
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
  /** The drawing's size on screen changed (the window, or the notebook cell's box the frame fills). */
  onResize: () => void = () => {};
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
    this.edgeLabelLayer = s("g", { class: "edge-labels" });
    this.viewport.append(this.segLayer, this.edgeLayer, this.edgeLabelLayer, this.nodeLayer, this.segLabelLayer);
    this.svg.append(defs, this.viewport);
    // the search's dimming, ring and matched edges: three paths in their own SVG over the graph, so a keystroke
    // changes three attributes there and nothing in the big drawing (no restyle or repaint of its elements)
    this.markSvg = s("svg", { id: "marks", class: "marks", "aria-hidden": "true" });
    this.markViewport = s("g", {});
    this.dimPath = s("path", { id: "search-dim", class: "search-dim", "fill-rule": "evenodd" });
    this.matchEdgePath = s("path", { class: "search-edges" });
    this.ringPath = s("path", { class: "search-ring" });
    this.markViewport.append(this.dimPath, this.matchEdgePath, this.ringPath);
    this.markSvg.append(this.markViewport);
    this.markSvg.style.display = "none";
    container.append(this.svg, this.markSvg);
    this.screenSize(); // measured now, while the drawing is empty, then kept by the observer (see screenSize)
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
    const far = this.k < FAR_K;
    if (far !== this.svg.classList.contains("far")) this.svg.classList.toggle("far", far);
    if (!far && this.lastVisible) this.detailSoon(); // what comes into view gets its labels
    if (this.culled) this.nearSoon(); // ... and in a large drawing, what comes near gets its elements
    const t = `translate(${this.tx.toFixed(1)},${this.ty.toFixed(1)}) scale(${this.k.toFixed(4)})`;
    this.viewport.setAttribute("transform", t);
    if (this.markViewport) { this.markViewport.setAttribute("transform", t); this.markSoon(); }
    this.onTransform();
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

  screenSize(): { w: number; h: number } {
    if (!this.size) {
      const r = this.svg.getBoundingClientRect();
      this.size = { w: r.width, h: r.height };
      new ResizeObserver((es) => {
        const c = es[es.length - 1].contentRect;
        const moved = this.size?.w !== c.width || this.size?.h !== c.height; // not the observer's first report
        this.size = { w: c.width, h: c.height };
        if (moved) this.onResize();
        this.markSoon(); // a larger view may reach past the search overlay's window
        if (this.culled) this.nearSoon(); // ... and past the part of a large drawing that is built
      }).observe(this.svg);
    }
    return this.size;
  }

  /** Highlight the search's matches and dim the rest (or hide it, `filter`); null clears the marks. Touches
   * classes only, not the drawing, so that a keystroke over thousands of nodes stays cheap. */
  mark(vids: Set<string> | null, filter: boolean): void {
    if (vids === null && this.marked === null) return; // nothing marked, nothing to clear (every draw asks)
    this.marked = vids;
    this.filtered = filter && vids !== null;
    this.applyMarks();
  }

  private applyMarks(): void {
    const m = this.marked;
    this.svg.classList.toggle("searching", m !== null);
    this.svg.classList.toggle("filtered", this.filtered);
    // the filter hides by class (style.css), so only it sets "match" on every element; the plain search draws its
    // marks in the overlay and leaves the drawing's elements alone (a class on thousands of them costs a restyle
    // and repaint of each: 150-250 ms on a keystroke that changes 5,000 matches)
    const perElement = this.filtered && m !== null;
    if (perElement || this.classMarked) {
      for (const [vid, el] of this.nodes) el.classList.toggle("match", perElement && m.has(vid));
      for (const el of this.edges.values()) {
        el.classList.toggle("match", perElement && m.has(el.dataset.from!) && m.has(el.dataset.to!));
      }
      this.classMarked = perElement;
    }
    this.drawMarkOverlay(perElement ? null : m);
  }

  /** The plain search's look: everything dimmed by one path with a hole at each match (even-odd fill), a ring
   * around each match, the edges between two matches drawn again above the dim. When more than half the drawn
   * nodes match (the first keystrokes: "l" matches thousands), only the non-matching nodes are covered, a box
   * over each: the browser rasterises a path of a few subpaths instead of a full-screen fill with thousands of
   * holes (that raster was most of a keystroke's 50-58 ms at 5,000 nodes). */
  private drawMarkOverlay(m: Set<string> | null): void {
    if (!m) {
      if (this.markSvg.style.display !== "none") {
        this.markSvg.style.display = "none";
        for (const p of [this.dimPath, this.ringPath, this.matchEdgePath]) p.removeAttribute("d");
        this.markD = ["", "", ""];
      }
      return;
    }
    // only the nodes within a screen of the view get a box: the rest are off-screen (a tall graph fitted as an
    // overview leaves most of 5,000 nodes there); a pan or zoom that leaves this window draws the overlay again
    const r = this.screenSize(), k = this.k;
    const w = r.w > 0 && r.h > 0
      ? { x0: -this.tx / k - r.w / k, y0: -this.ty / k - r.h / k, x1: (2 * r.w - this.tx) / k, y1: (2 * r.h - this.ty) / k }
      : { x0: -Infinity, y0: -Infinity, x1: Infinity, y1: Infinity }; // not laid out yet (a hidden tab): all of it
    this.markWindow = w;
    const hits: string[] = [], misses: string[] = [];
    let matches = 0;
    // every visible item, drawn or not (a large drawing builds only what is near the view: cull.ts)
    for (const vid of this.lastVisible?.items.keys() ?? this.nodes.keys()) {
      const p = this.lastPos.get(vid);
      if (!p) continue;
      const hit = m.has(vid);
      if (hit) matches++;
      if (p.x + NODE_W / 2 < w.x0 || p.x - NODE_W / 2 > w.x1 || p.y + NODE_H / 2 < w.y0 || p.y - NODE_H / 2 > w.y1) continue;
      (hit ? hits : misses).push(`M${p.x - NODE_W / 2},${p.y - NODE_H / 2}h${NODE_W}v${NODE_H}h${-NODE_W}z`);
    }
    const inverse = hits.length > misses.length;
    const rects = hits.join("");
    // rings and edges only for a few matches (by all of them, not those in the window: "l" has thousands, and
    // ringing the 2,000 on screen costs more raster than it shows)
    const detail = matches <= MARK_DETAIL_MAX;
    const edges: string[] = [];
    if (detail) {
      for (const el of this.edges.values()) {
        if (el._d && m.has(el.dataset.from!) && m.has(el.dataset.to!)) edges.push(el._d);
      }
    }
    this.setMarkD(0, this.dimPath, inverse ? misses.join("") || "M0,0" : `M-1e6,-1e6H1e6V1e6H-1e6z${rects}`);
    this.setMarkD(1, this.ringPath, (detail && rects) || "M0,0");
    this.setMarkD(2, this.matchEdgePath, edges.join("") || "M0,0");
    this.markSvg.dataset.matches = String(matches);
    this.markSvg.dataset.dim = inverse ? "misses" : "all";
    this.markSvg.style.display = "";
  }

  /** The part of the drawing the overlay's boxes cover (graph coordinates): the view and a screen around it. */
  private markWindow: Bounds | null = null;
  private markQueued = false;

  /** The view moved: once it leaves the overlay's window, the overlay is drawn again in the next frame (once per
   * frame, however many transforms a pan sets). */
  private markSoon(): void {
    const w = this.markWindow;
    if (this.markQueued || !w || !this.marked || this.filtered) return;
    const r = this.screenSize(), k = this.k;
    const x0 = -this.tx / k, y0 = -this.ty / k, x1 = (r.w - this.tx) / k, y1 = (r.h - this.ty) / k;
    if (x0 >= w.x0 && y0 >= w.y0 && x1 <= w.x1 && y1 <= w.y1) return;
    this.markQueued = true;
    requestAnimationFrame(() => {
      this.markQueued = false;
      if (this.marked && !this.filtered) this.drawMarkOverlay(this.marked);
    });
  }

  /** The overlay's paths as last set (dim, ring, edges): a keystroke that leaves them as they were ("layers.1"
   * -> "layers.17" can match the same drawn nodes) does not make the browser rasterise them again. */
  private markD: [string, string, string] = ["", "", ""];

  private setMarkD(i: 0 | 1 | 2, el: SVGPathElement, d: string): void {
    if (this.markD[i] === d) return;
    this.markD[i] = d;
    el.setAttribute("d", d);
  }

  /** Mark the selection's path to the loss (`down`) and its inputs' cone (`up`); the rest is dimmed. null
   * `src` clears the marks. An edge is on a path when both its ends are (or are the selection). */
  markPaths(src: Set<string> | null, down: Set<string> | null, up: Set<string> | null): void {
    if (src === null && this.path === null) return; // nothing marked, nothing to clear (every draw asks)
    this.path = src ? { src, down, up } : null;
    this.applyPaths();
  }

  /** Elements carry path classes (so clearing them must visit them; with none, a render skips the loop). */
  private pathMarked = false;

  private applyPaths(): void {
    const p = this.path;
    this.svg.classList.toggle("pathing", p !== null);
    if (!p && !this.pathMarked) return;
    this.pathMarked = p !== null;
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
    this.drawNear(); // now, not in the next frame: the caller selects or marks what it centred on
  }

  /** Fit the graph in view, keeping its labels readable (fit.ts). */
  fit(b: Bounds): void {
    const r = this.screenSize();
    const t = fitTransform(b, r.w, r.h);
    this.setTransform(t.tx, t.ty, t.k);
  }

  /** Labels, badges and tooltips are built on every node drawn now (an export asked: it shows them all). */
  private detailForced = false;
  private lastPlace: Placement | null = null;
  private lastGraph: StepGraph | null = null;
  private detailQueued = false;

  /** Whether a node drawn now at `p` gets its labels: not when far, nor when it is more than half a screen out of
   * view (laying out and painting the text of a few thousand nodes nobody sees was most of a live frame); an
   * export asks for all of them. */
  private wantsDetail(p: Pos): boolean {
    if (this.detailForced) return true;
    if (this.k < FAR_K) return false;
    const r = this.screenSize();
    const x = p.x * this.k + this.tx, y = p.y * this.k + this.ty; // the node's centre on screen
    const mx = r.w / 2 + NODE_W * this.k, my = r.h / 2 + NODE_H * this.k;
    return x > -mx && x < r.w + mx && y > -my && y < r.h + my;
  }

  /** The view moved or came near: the nodes it reaches that were drawn as outlines get their labels in the next
   * frame (once per frame, however many transforms a pan or zoom sets before it). */
  private detailSoon(): void {
    if (this.detailQueued) return;
    this.detailQueued = true;
    requestAnimationFrame(() => {
      this.detailQueued = false;
      const v = this.lastVisible, place = this.lastPlace;
      if (!v || !place || this.k < FAR_K) return;
      let drawn = false;
      for (const [vid, el] of this.nodes) {
        if (el._detail) continue;
        const it = v.items.get(vid), p = place.pos.get(vid);
        if (it && p && this.wantsDetail(p)) { this.drawNode(it, p); drawn = true; }
      }
      if (drawn && this.marked) this.applyMarks(); // drawNode wrote the class without the marks
      if (drawn && this.path) this.applyPaths();
    });
  }

  /** Build every node's labels now, whatever the zoom and the view (the SVG and PNG exports, which read the
   * drawing right after, show them); later draws go back to labelling only what is near. */
  ensureDetail(): void {
    this.detailForced = true;
    try {
      if (this.lastVisible && this.lastPlace) this.render(this.lastVisible, this.lastPlace, this.lastGraph);
    } finally {
      this.detailForced = false;
    }
  }

  /** The nodes and edges a render is building, added to their layers when it has drawn them all. */
  private newNodes: DocumentFragment | null = null;
  private newEdges: DocumentFragment | null = null;

  /** Draw `v` at the positions in `place`. In a large drawing (CULL_MIN_ITEMS) only the items near the view get
   * elements (cull.ts); the rest are built when the view comes near them (drawNear). */
  render(v: Visible, place: Placement, graph: StepGraph | null): void {
    this.lastVisible = v;
    this.lastPlace = place;
    this.lastGraph = graph;
    this.lastPos = place.pos;
    const r = this.screenSize();
    this.culled = !this.detailForced && v.items.size >= CULL_MIN_ITEMS && r.w > 0 && r.h > 0;
    this.nearBox = this.culled ? nearWindow(this.tx, this.ty, this.k, r.w, r.h) : null;
    // the bottom of each checkpoint node's recomputed column: its other edges leave below it (see drawEdge)
    const columnBottom = new Map<string, number>();
    for (const it of v.items.values()) {
      const p = it.anchor ? place.pos.get(it.vid) : undefined;
      if (p) columnBottom.set(it.anchor!, Math.max(columnBottom.get(it.anchor!) ?? -Infinity, p.y + NODE_H / 2));
    }
    this.columnBottom = columnBottom;
    this.drawItems(v, place.pos, false);
    for (const [vid, el] of this.nodes) if (!v.items.has(vid) || !place.pos.has(vid)) { el.remove(); this.nodes.delete(vid); }
    const eseen = new Set<string>();
    for (const e of v.edges) if (place.pos.has(e.from) && place.pos.has(e.to)) eseen.add(`${e.from}\u0000${e.to}`);
    for (const [id, el] of this.edges) if (!eseen.has(id)) { el.remove(); this.edges.delete(id); }
    this.drawSegments(v, place, graph);
    this.drawEdgeLabels(v, place.pos);
    if (this.marked) this.applyMarks(); // nodes drawn anew got their class from drawNode, without the marks
    if (this.path) this.applyPaths();
    if (this.diffMarks) this.applyDiff();
    this.onRender(v, place.pos);
  }

  /** Only the items near the view have elements (cull.ts), within `nearBox` as of the last render or move. */
  private culled = false;
  private nearBox: Bounds | null = null;
  private columnBottom = new Map<string, number>();
  private nearQueued = false;

  /** Draw the nodes and edges of `v`: each one that has an element (updated where it changed), and each one near
   * the view that has none yet (all of them when not culling). `onlyNew`: the view moved, nothing else changed:
   * only the missing ones near it are built. Returns how many elements were built. */
  private drawItems(v: Visible, pos: Map<string, Pos>, onlyNew: boolean): number {
    const w = this.nearBox;
    let built = 0;
    // new nodes and edges are built outside the document and added at once: an attribute written on an element
    // in the document costs the browser more (style invalidation) than on one that is not yet
    this.newNodes = document.createDocumentFragment();
    try {
      for (const it of v.items.values()) {
        const p = pos.get(it.vid);
        if (!p) continue;
        const has = this.nodes.has(it.vid);
        if (has ? onlyNew : w !== null && !nodeNear(p, w)) continue;
        if (!has) built++;
        this.drawNode(it, p);
      }
    } finally {
      this.nodeLayer.append(this.newNodes);
      this.newNodes = null;
    }
    this.newEdges = document.createDocumentFragment();
    try {
      for (const e of v.edges) {
        const a = pos.get(e.from), b = pos.get(e.to);
        if (!a || !b) continue;
        const id = `${e.from}\u0000${e.to}`;
        const has = this.edges.has(id);
        if (has ? onlyNew : w !== null && !edgeNear(a, b, w)) continue;
        if (!has) built++;
        const below = v.items.get(e.to)?.anchor === e.from ? undefined : this.columnBottom.get(e.from);
        this.drawEdge(id, e, a, b, below);
      }
    } finally {
      this.edgeLayer.append(this.newEdges);
      this.newEdges = null;
    }
    return built;
  }

  /** The view moved in a culled drawing: once its screen leaves the window last drawn, the items near it are
   * built in the next frame (once per frame, however many transforms a pan sets before it). */
  private nearSoon(): void {
    if (this.nearQueued || !this.nearBox) return;
    const r = this.screenSize();
    if (viewInside(this.nearBox, this.tx, this.ty, this.k, r.w, r.h)) return;
    this.nearQueued = true;
    requestAnimationFrame(() => { this.nearQueued = false; this.drawNear(); });
  }

  /** Build the elements of the items near the view that have none (a culled drawing; elements built before stay). */
  drawNear(): void {
    const v = this.lastVisible;
    if (!this.culled || !v) return;
    const r = this.screenSize();
    const w = nearWindow(this.tx, this.ty, this.k, r.w, r.h);
    const old = this.nearBox;
    if (old && w.x0 >= old.x0 && w.y0 >= old.y0 && w.x1 <= old.x1 && w.y1 <= old.y1) return;
    this.nearBox = w;
    if (!this.drawItems(v, this.lastPos, true)) return;
    if (this.marked) this.applyMarks(); // the new elements got their class from drawNode, without the marks
    if (this.path) this.applyPaths();
    if (this.diffMarks) this.applyDiff();
  }

  /** Whether edges show their tensor's shape now: the user's choice, else on for small graphs. */
  edgeShapesOn(v: Visible | null = this.lastVisible): boolean {
    return this.edgeShapes ?? (!!v && v.items.size <= EDGE_SHAPES_AUTO_MAX);
  }

  /** Label each edge whose source is a node with that node's output shape, at the middle of the curve (or a
   * quarter before or after it), skipping a label that would overlap a node or another label. */
  private drawEdgeLabels(v: Visible, pos: Map<string, Pos>): void {
    const seen = new Set<string>();
    if (this.edgeShapesOn(v)) {
      // a grid of occupied boxes: the nodes first, then each label placed
      const grid = new Map<string, { x0: number; y0: number; x1: number; y1: number }[]>();
      const cells = (b: { x0: number; y0: number; x1: number; y1: number }) => {
        const out: string[] = [];
        for (let i = Math.floor(b.x0 / LABEL_CELL); i <= Math.floor(b.x1 / LABEL_CELL); i++) {
          for (let j = Math.floor(b.y0 / LABEL_CELL); j <= Math.floor(b.y1 / LABEL_CELL); j++) out.push(`${i},${j}`);
        }
        return out;
      };
      const put = (b: { x0: number; y0: number; x1: number; y1: number }) => {
        for (const c of cells(b)) { let l = grid.get(c); if (!l) grid.set(c, (l = [])); l.push(b); }
      };
      const free = (b: { x0: number; y0: number; x1: number; y1: number }) => cells(b).every((c) =>
        !(grid.get(c) ?? []).some((o) => b.x0 < o.x1 && o.x0 < b.x1 && b.y0 < o.y1 && o.y0 < b.y1));
      for (const it of v.items.values()) {
        const p = pos.get(it.vid);
        if (p) put({ x0: p.x - NODE_W / 2, y0: p.y - NODE_H / 2 - 16, x1: p.x + NODE_W / 2 + 4, y1: p.y + NODE_H / 2 });
      }
      for (const e of v.edges) {
        const src = v.items.get(e.from)?.node;
        const a = pos.get(e.from), b = pos.get(e.to);
        if (!src || !a || !b) continue;
        const text = shapeText(src.shape);
        const w = text.length * 6.2 + 6;
        const y1 = a.y + NODE_H / 2, y2 = b.y - NODE_H / 2 - 2;
        const dy = Math.max(20, (y2 - y1) / 2);
        let spot: { x: number; y: number; box: { x0: number; y0: number; x1: number; y1: number } } | null = null;
        for (const t of [0.5, 0.3, 0.7]) {
          // the edge's cubic curve at t (drawEdge's control points)
          const u = 1 - t;
          const x = u * u * u * a.x + 3 * u * u * t * a.x + 3 * u * t * t * b.x + t * t * t * b.x;
          const y = u * u * u * y1 + 3 * u * u * t * (y1 + dy) + 3 * u * t * t * (y2 - dy) + t * t * t * y2;
          const box = { x0: x + 4, y0: y - LABEL_H / 2, x1: x + 4 + w, y1: y + LABEL_H / 2 };
          if (free(box)) { spot = { x: box.x0 + 3, y: y + 4, box }; break; }
        }
        if (!spot) continue;
        put(spot.box);
        const id = `${e.from}\u0000${e.to}`;
        seen.add(id);
        let el = this.edgeLabels.get(id);
        if (!el) {
          el = s("text", { class: "edge-label" }) as LabelEl;
          el.dataset.from = e.from;
          el.dataset.to = e.to;
          this.edgeLabelLayer.append(el);
          this.edgeLabels.set(id, el);
        }
        const sig = `${spot.x.toFixed(1)},${spot.y.toFixed(1)}|${text}`;
        if (el._sig === sig) continue;
        el._sig = sig;
        el.setAttribute("x", spot.x.toFixed(1));
        el.setAttribute("y", spot.y.toFixed(1));
        el.textContent = text;
      }
    }
    for (const [id, el] of this.edgeLabels) if (!seen.has(id)) { el.remove(); this.edgeLabels.delete(id); }
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
    // a value that went NaN/Inf in forward (no gradient came: detect_anomaly stopped the run)
    const forwardBad = !!n?.anomaly && gc === "none";
    const cls = `vnode kind-${kind} grad-${gc}${it.ghost ? " ghost" : ""}${this.selected === it.vid ? " selected" : ""}` +
      `${this.focus === it.vid ? " focus" : ""}${flags.map((f) => " " + f).join("")}`;
    const numel = n ? n.shape.reduce((a, b) => a * b, 1) : Infinity;
    const numbers = !!n && numel <= this.numbersUpTo;
    const colour = gradColor(grad);
    const saved = this.savedBytesOf && (it.type !== "node" || n?.kind === "op") ? this.savedBytesOf(it) : null;
    const posKey = `${p.x},${p.y}`;
    const rx = n && n.kind !== "op" ? 20 : 6;
    let el = this.nodes.get(it.vid);
    if (!el) {
      el = newNodeEl(it.vid, { cls, gradClass: gc, kind, numbers, rx, dashed: gc === "none", group: it.type !== "node",
        recomputed: !!n?.recomputed }) as NodeEl;
      // built detached and added with the render's other new nodes at once (render), or now (detailSoon)
      (this.newNodes ?? this.nodeLayer).append(el);
      this.nodes.set(it.vid, el);
    }
    if (el._pos !== posKey) {
      el.setAttribute("transform", `translate(${p.x - NODE_W / 2},${p.y - NODE_H / 2})`);
      el._pos = posKey;
    }
    const detail = this.wantsDetail(p);
    // an outline (no labels built, none wanted) shows only its class, colour, group count and saved badge: its
    // signature leaves the label texts out, so they are not formatted for thousands of far-out nodes (they are
    // when the node is drawn with its labels: detail, a different signature)
    const outline = !detail && !el._detail;
    let title = "", sub = "", badge: string | null = null;
    if (!outline) {
      title = n ? nodeTitle(n) : it.label;
      const data = numbers && n.values && n.values.length === numel ? `data ${numbersText(n.values)}` : null;
      const gvals = numbers && grad?.values && grad.values.length === numel ? `grad ${numbersText(grad.values)}` : null;
      sub = n ? data ?? shapeText(n.shape) : `${it.count} nodes${it.type === "group" ? " ▸" : ""}`;
      // "none" has no word: no badge; a backward that raised here says so whatever gradient arrived before
      // a group flags how many of its members are in its worst class
      const word = GRAD_CLASSES[gc].word;
      // a value that went NaN/Inf in forward (no gradient came: detect_anomaly stopped the run) says so too
      badge = n?.error ? "error" : forwardBad ? GRAD_CLASSES.nonfinite.word : gvals && (gc === "ok" || gc === "zero") ? gvals :
        gc === "ok" ? `‖g‖ ${fmt(grad!.norm, 2)}` : !n && word ? `${worst} ${word}` : word;
    }
    const group = it.type === "node" ? "" : computed;
    const sig = outline ? `o|${cls}|${colour}|${numbers}|${group}|${saved}` : `${cls}|${title}|${sub}|${badge}|${colour}|${group}|${saved}`;
    // a node drawn with its labels keeps them when the view goes far or away (style.css hides them far out)
    if (el._sig === sig && (el._detail || !detail)) return;
    el._sig = sig;
    el._detail = detail;
    // setAttribute, not the dataset's setters: thousands of new nodes at once, and these are cheaper; what the
    // element already says (its look's template, or the last draw) is not written again
    const at = el._attrs!;
    if (at.cls !== cls) { el.setAttribute("class", cls); at.cls = cls; }
    if (at.gradClass !== gc) { el.setAttribute("data-grad-class", gc); at.gradClass = gc; }
    el.setAttribute("data-grad-color", colour);
    if (at.kind !== kind) { el.setAttribute("data-kind", kind); at.kind = kind; }
    if (n) el.setAttribute("data-key", n.key); else el.removeAttribute("data-key");
    if (at.numbers !== numbers) {
      if (numbers) el.setAttribute("data-numbers", "1"); else el.removeAttribute("data-numbers");
      at.numbers = numbers;
    }
    const bc = n?.error ? "error" : forwardBad ? "nonfinite" : gc;
    const badgeColour = n?.error ? ERROR_COLOUR : forwardBad ? GRAD_CLASSES.nonfinite.colour : colour;
    // the labels, tooltip and badge only when they are built (detail): an outline needs none of their text
    drawNodeParts(el, {
      rx, stroke: colour, strokeWidth: gc === "none" ? 1.5 : Math.min(5, gradWidth(grad)),
      dashed: gc === "none", group: it.type !== "node", recomputed: !!n?.recomputed,
      title: !detail ? "" : n && n.kind !== "op" && n.name ? clipLeft(title, 21) : clip(title, 21), sub: detail ? clip(sub, 26) : "",
      tip: !detail ? "" : n?.recomputed ? `${title} ${sub}: recomputed in backward (checkpoint segment #${n.segment})` : `${title} ${sub}`,
      // the badge's width fits numbers; its text is readable on every ramp colour (dark purple to yellow)
      badge: badge && detail ? { cls: bc, text: clip(badge, 24), width: Math.min(NODE_W + 4, Math.max(70, badge.length * 6.2 + 10)),
        fill: badgeColour, textFill: textOn(badgeColour) } : null,
      count: it.type !== "node" && it.count ? (computed ? `${computed}/${it.count} grads` : "") : null,
    }, detail);
    // the saved-for-backward badge (its toggle): not one of the node's parts; redrawn whole when it changes
    if (el.hasAttribute("data-saved")) {
      for (const old of el.querySelectorAll(":scope > .saved-badge, :scope > .saved-badge-text")) old.remove();
      el.removeAttribute("data-saved");
    }
    if (saved !== null) drawSavedBadge(el, saved, it.type !== "node");
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
    const cls = `edge grad-${gc}${e.ghost ? " ghost" : ""}${rc ? " recompute" : ""}`;
    let el = this.edges.get(id);
    const fresh = !el;
    if (!el) {
      // its class, dash and arrowhead from its template: one call instead of one per attribute
      el = edgeTemplate(cls, gc).cloneNode() as EdgeEl;
      el.setAttribute("data-from", e.from);
      el.setAttribute("data-to", e.to);
      (this.newEdges ?? this.edgeLayer).append(el);
      this.edges.set(id, el);
    }
    if (el._sig === sig) return;
    el._sig = sig;
    el._d = d;
    el.setAttribute("d", d);
    el.setAttribute("stroke", colour);
    el.setAttribute("stroke-width", w.toFixed(2));
    if (fresh) return;
    el.setAttribute("class", cls);
    if (gc === "none") el.setAttribute("stroke-dasharray", "4 4"); else el.removeAttribute("stroke-dasharray");
    el.setAttribute("data-grad-class", gc);
  }

  private drawSegments(v: Visible, place: Placement, graph: StepGraph | null): void {
    const segs = new Map<number, Segment>();
    for (const seg of graph ? graph.segments : []) segs.set(seg.ordinal, seg);
    const keep = new Set<number>();
    // a graph without checkpoint segments has no shading to compute (segmentRegions visits every group's members)
    for (const r of segs.size ? segmentRegions(v, place.pos) : []) {
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
      // with the saved-bytes toggle on, what the segment saved (known once backward recomputed it)
      const mem = this.savedBytesOf && graph ? segmentMemory(graph, seg) : null;
      if (mem && mem.saved !== null) lab.dataset.saved = String(mem.saved); else delete lab.dataset.saved;
      lab.textContent = `checkpoint #${seg.ordinal} · ${segmentName(seg.name)} · ${segmentLabel(seg)}` +
        (mem && mem.saved !== null ? ` · saved ${bytesText(Math.max(0, mem.saved))}` : "");
    }
    for (const [o, el] of this.segs) if (!keep.has(o)) { el.remove(); this.segs.delete(o); }
    for (const [o, el] of this.segLabels) if (!keep.has(o)) { el.remove(); this.segLabels.delete(o); }
  }

  /** How many of the visible items have an element now (all of them unless the drawing is culled). */
  nodeCount(): number {
    return this.nodes.size;
  }
}

/** One edge template per gradient class (its class, dash and arrowhead in place): a new edge is its clone, and
 * only its ends, path, colour and width are written. */
const edgeTemplates = new Map<string, EdgeEl>();

function edgeTemplate(cls: string, gc: string): EdgeEl {
  let t = edgeTemplates.get(cls);
  if (!t) {
    if (edgeTemplates.size >= 64) edgeTemplates.clear();
    t = s("path", { "marker-end": "url(#arrow)", class: cls, "data-grad-class": gc, "stroke-dasharray": gc === "none" ? "4 4" : null }) as EdgeEl;
    edgeTemplates.set(cls, t);
  }
  return t;
}

/** The saved-for-backward badge under a node's bottom-right corner: its bytes (a group's: the total inside, "Σ"). */
function drawSavedBadge(el: SVGGElement, bytes: number, total: boolean): void {
  const text = `${total ? "Σ " : ""}${bytesText(bytes)} saved`;
  const w = text.length * 6 + 10;
  el.dataset.saved = String(bytes);
  el.append(s("rect", { class: `saved-badge${bytes ? "" : " none"}`, x: NODE_W + 4 - w, y: NODE_H - 6, width: w, height: 14, rx: 7 }));
  el.append(s("text", { class: "saved-badge-text", x: NODE_W + 4 - w / 2, y: NODE_H + 4.5 }, text));
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
