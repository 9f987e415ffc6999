// The graph pane: what is visible (groups collapsed within the node budget), where it goes (the incremental
// placement, replaced by the worker's layout when it lands), the SVG view, and the toolbar that acts on them.
import { $, h } from "./dom";
import { params } from "./env";
import { computeVisible, type VItem, type ViewChoices, type Visible } from "./groups";
import { LayoutRunner } from "./layout";
import type { Metrics } from "./metrics";
import { Minimap } from "./minimap";
import { Placement, type Pos } from "./place";
import { pngScale, svgToPng } from "./png";
import type { StepGraph } from "./state";
import { GraphView, svgDocument } from "./view";

export interface GraphHooks {
  /** The graph the pane shows (the shown step). */
  graph(): StepGraph | null;
  /** Redraw everything (the budget or the groups changed). */
  draw(): void;
  /** The exported SVG's title. */
  title(): string;
  status(text: string): void;
}

export class GraphPane {
  readonly view: GraphView;
  readonly layout: LayoutRunner;
  readonly minimap: Minimap;
  readonly choices: ViewChoices = { budget: Number(params.get("budget") ?? 300), expanded: new Set(), collapsed: new Set() };
  place = new Placement();
  visible: Visible | null = null;
  /** The structure to draw changed (another step, a group opened): draw even without new events. */
  dirty = true;
  /** Fit the graph in view as it grows and when a full layout lands, until the user pans or zooms (per run). */
  private autoFit = true;
  private fittedBounds: { x0: number; y0: number; x1: number; y1: number } | null = null;
  private readonly startedAt = performance.now();
  /** The item the view was centred on (search, deep link): kept centred when the full layout moves it, until
   * the user pans or zooms. */
  private centred: string | null = null;

  constructor(private metrics: Metrics, private hooks: GraphHooks) {
    this.view = new GraphView($("#graph-wrap"));
    this.view.onUserMove = () => { this.autoFit = false; this.centred = null; };
    // a view that grows or shrinks (a notebook cell's box settling at the height its graph asked for, a resized
    // window) fits its graph again, unless the user has moved it
    this.view.onResize = () => { if (this.autoFit && this.visible) this.fitIfNeeded(this.visible, true); };
    this.layout = new LayoutRunner(metrics, () => this.visible, (pos) => this.adopt(pos), hooks.status);
    this.minimap = this.attachMinimap();
    this.bindToolbar();
  }

  /** A new run: nothing placed, fitted or laid out yet. */
  reset(): void {
    this.place = new Placement();
    this.visible = null;
    this.autoFit = true;
    this.fittedBounds = null;
    this.centred = null;
    this.layout.forget();
  }

  /** The visible structure changed by the user's hand (a group opened or closed, "expand all", the budget):
   * place everything again, so that what follows an opened group moves below it instead of staying where the
   * collapsed group ended (the layered placement keeps every edge pointing down). */
  replaceAll(): void {
    this.place = new Placement();
  }

  /** Fit the visible graph in view (the first draw of a run; later ones while it grows past what was fitted). */
  private fitIfNeeded(v: Visible, force: boolean): void {
    const b = this.place.bounds(v);
    const f = this.fittedBounds;
    const inside = f && b.x0 >= f.x0 && b.y0 >= f.y0 && b.x1 <= f.x1 && b.y1 <= f.y1;
    if (f && (!this.autoFit || (inside && !force))) return;
    this.view.fit(b);
    this.fittedBounds = b;
  }

  /** Compute what is visible of `g`, place and draw it; the first time there is something, fit it in view. */
  draw(g: StepGraph, ghost: StepGraph | null, selected: string | null): Visible {
    const v = computeVisible(g, this.choices, ghost);
    this.visible = v;
    this.place.place(v);
    // fitted before it is drawn: the zoom it lands at decides how much of each node is built (view.ts FAR_K)
    if (v.items.size) this.fitIfNeeded(v, false);
    this.view.selected = selected;
    this.view.render(v, this.place, g);
    this.dirty = false;
    if (this.metrics.firstRenderMs === null && v.items.size) this.metrics.firstRenderMs = performance.now() - this.startedAt;
    return v;
  }

  /** The line the canvas shows when it has nothing to draw (null hides it). */
  note(text: string | null): void {
    const el = $("#graph-note");
    el.hidden = text === null;
    el.textContent = text ?? "";
  }

  /** Draw the visible items again where they are (the selection or the positions changed). */
  redraw(): void {
    const g = this.hooks.graph();
    if (this.visible && g) this.view.render(this.visible, this.place, g);
  }

  /** The representative on screen of a node key (its group when collapsed). */
  vidOf(key: string): string {
    return this.visible?.rep.get(key) ?? key;
  }

  item(vid: string): VItem | null {
    return this.visible?.items.get(vid) ?? null;
  }

  /** Open a group, or unfold a run of blocks. */
  expand(it: VItem): void {
    const id = it.type === "fold" ? it.vid : it.path!;
    if (it.type === "group" || it.type === "fold") {
      this.choices.collapsed.delete(id);
      this.choices.expanded.add(id);
    }
    this.replaceAll();
  }

  private adopt(pos: Record<string, Pos>): void {
    this.place.adopt(pos);
    const g = this.hooks.graph();
    if (this.visible && g) {
      this.fitIfNeeded(this.visible, true); // every position changed: fit again unless the user moved the view
      this.view.render(this.visible, this.place, g);
      const c = this.centred ? this.place.pos.get(this.centred) : undefined;
      if (c) this.view.centre(c);
    }
  }

  private collapseAll(): void {
    this.choices.expanded.clear();
    if (this.visible) for (const p of this.visible.groups.keys()) if (!p.includes(".")) this.choices.collapsed.add(p);
    this.hooks.draw();
  }

  private expandAll(): void {
    this.choices.collapsed.clear();
    if (this.visible) for (const p of this.visible.groups.keys()) this.choices.expanded.add(p);
    this.replaceAll();
    this.hooks.draw();
  }

  /** Centre the view on a visible item (the search's and the deep link's target); the page stops fitting. */
  centreOn(vid: string): void {
    const p = this.place.pos.get(vid);
    if (!p) return;
    this.autoFit = false;
    this.centred = vid;
    this.view.centre(p);
  }

  /** The shown graph as a standalone SVG file (download). */
  private exportSvg(): void {
    if (!this.visible) return;
    this.view.ensureDetail();
    const text = svgDocument(this.view.svg, this.place.bounds(this.visible), this.hooks.title());
    download(new Blob([text], { type: "image/svg+xml" }), `${this.fileStem()}.svg`);
  }

  /** The shown graph as a PNG file: the SVG export rasterised (twice its size, less where browsers refuse). */
  private async exportPng(): Promise<void> {
    if (!this.visible) return;
    this.view.ensureDetail();
    const text = svgDocument(this.view.svg, this.place.bounds(this.visible), this.hooks.title());
    const root = new DOMParser().parseFromString(text, "image/svg+xml").documentElement;
    const w = Number(root.getAttribute("width")), hh = Number(root.getAttribute("height"));
    try {
      download(await svgToPng(text, w, hh, pngScale(w, hh)), `${this.fileStem()}.png`);
    } catch (e) {
      this.hooks.status(String(e));
    }
  }

  /** The minimap follows the view's transform and redraws its overview after each render. */
  private attachMinimap(): Minimap {
    const v = this.view;
    const m = new Minimap($("#graph-wrap"), {
      transform: () => ({ tx: v.tx, ty: v.ty, k: v.k }),
      screen: () => v.screenSize(),
      centreAt: (p) => {
        v.onUserMove();
        const r = v.screenSize();
        v.setTransform(r.w / 2 - p.x * v.k, r.h / 2 - p.y * v.k, v.k);
      },
    });
    v.onTransform = () => m.moved();
    const shapes = $("#edge-shapes") as HTMLInputElement;
    shapes.addEventListener("change", () => { v.edgeShapes = shapes.checked; this.redraw(); });
    v.onRender = (vis, pos) => { m.update(vis, pos, this.place.bounds(vis)); shapes.checked = v.edgeShapesOn(vis); };
    return m;
  }

  private fileStem(): string {
    return `rtxviz-step-${this.hooks.graph()?.step ?? "graph"}`;
  }

  private bindToolbar(): void {
    $("#fit-btn").addEventListener("click", () => {
      if (!this.visible) return;
      this.autoFit = true;
      this.fitIfNeeded(this.visible, true);
    });
    $("#collapse-btn").addEventListener("click", () => this.collapseAll());
    $("#expand-btn").addEventListener("click", () => this.expandAll());
    $("#svg-btn").addEventListener("click", () => this.exportSvg());
    $("#png-btn").addEventListener("click", () => void this.exportPng());
    const budget = $("#budget") as HTMLSelectElement;
    for (const b of [100, 300, 1000, 5000]) budget.append(h("option", { value: String(b) }, `${b}`));
    budget.value = String(this.choices.budget);
    if (budget.value !== String(this.choices.budget)) {
      budget.append(h("option", { value: String(this.choices.budget) }, String(this.choices.budget)));
      budget.value = String(this.choices.budget);
    }
    const numbers = $("#numbers") as HTMLSelectElement;
    for (const [v, t] of [[0, "off"], [1, "scalars"], [4, "≤ 4 elements"], [16, "≤ 16 elements"]] as const) {
      numbers.append(h("option", { value: String(v) }, t));
    }
    numbers.value = String(this.view.numbersUpTo);
    numbers.addEventListener("change", () => { this.view.numbersUpTo = Number(numbers.value); this.hooks.draw(); });
    budget.addEventListener("change", () => { this.choices.budget = Number(budget.value); this.replaceAll(); this.hooks.draw(); });
  }
}

/** Offer a file for download (a link clicked and removed). */
function download(blob: Blob, name: string): void {
  const url = URL.createObjectURL(blob);
  const a = h("a", { href: url, download: name });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}
