// The minimap: an overview of the whole visible graph in a corner of the canvas, with the viewport's rectangle;
// a click or a drag on it moves the view there. Drawn from the placement's positions onto a canvas (one
// rectangle per item, no second SVG), again only when the items or their positions change. The viewport's
// rectangle is a box over the canvas moved by a CSS transform on its own compositing layer: a pan frame changes
// one transform there (no canvas redrawn, no style or layout), once per animation frame.
import { gradColor } from "./colors";
import { h } from "./dom";
import type { Visible } from "./groups";
import { NODE_H, NODE_W, type Pos } from "./place";
import { itemGrad } from "./view";

/** Graphs with fewer visible items than this fit the canvas well enough: no minimap. */
export const MINIMAP_MIN_ITEMS = 150;
const W = 200, H = 150, PAD = 6;

/** Where the minimap draws a graph of bounds `b`: scale and offset that fit it in W x H, aspect kept. */
export function minimapScale(b: { x0: number; y0: number; x1: number; y1: number }, w = W, hh = H):
  { k: number; ox: number; oy: number } {
  const bw = Math.max(1, b.x1 - b.x0), bh = Math.max(1, b.y1 - b.y0);
  const k = Math.min((w - 2 * PAD) / bw, (hh - 2 * PAD) / bh);
  return { k, ox: (w - bw * k) / 2 - b.x0 * k, oy: (hh - bh * k) / 2 - b.y0 * k };
}

/** What the minimap needs of the view: its transform, its size on screen, and a way to centre it. */
export interface MinimapHooks {
  transform(): { tx: number; ty: number; k: number };
  screen(): { w: number; h: number };
  /** Move the view so that the drawing's point `p` is at the centre of the screen (the zoom kept). */
  centreAt(p: Pos): void;
}

export class Minimap {
  /** The minimap's box: the overview canvas and the viewport's rectangle over it. */
  readonly box: HTMLElement;
  readonly canvas: HTMLCanvasElement;
  private readonly view: HTMLElement;
  /** The rectangle's size last set (a pan changes only its position). */
  private viewSize = "";
  private fit: { k: number; ox: number; oy: number } | null = null;
  private frame = 0;
  /** Items drawn in the overview (the browser tests read it). */
  drawnItems = 0;

  constructor(container: HTMLElement, private hooks: MinimapHooks) {
    const ratio = Math.max(1, Math.min(2, window.devicePixelRatio || 1));
    this.canvas = h("canvas", { class: "minimap-canvas", width: W * ratio, height: H * ratio });
    this.canvas.style.width = `${W}px`;
    this.canvas.style.height = `${H}px`;
    this.view = h("div", { class: "minimap-view" });
    this.box = h("div", { id: "minimap", class: "minimap", title: "overview: click or drag to move the view",
      "aria-label": "graph overview" }, this.canvas, this.view);
    this.box.style.width = `${W}px`;
    this.box.style.height = `${H}px`;
    this.box.hidden = true;
    container.append(this.box);
    this.attachPointer();
  }

  private pending: (() => void) | null = null;

  /** The visible items or their positions changed: draw the overview again (or hide it for small graphs) in the
   * next animation frame, once however many renders come before it. */
  update(v: Visible | null, pos: Map<string, Pos>, bounds: { x0: number; y0: number; x1: number; y1: number } | null): void {
    const first = this.pending === null;
    this.pending = () => this.draw(v, pos, bounds);
    if (first) requestAnimationFrame(() => { const f = this.pending; this.pending = null; f?.(); });
  }

  private draw(v: Visible | null, pos: Map<string, Pos>, bounds: { x0: number; y0: number; x1: number; y1: number } | null): void {
    const show = !!v && !!bounds && v.items.size >= MINIMAP_MIN_ITEMS;
    this.box.hidden = !show;
    this.box.dataset.items = show ? String(v!.items.size) : "0";
    if (!show) { this.fit = null; this.drawnItems = 0; return; }
    const ratio = this.canvas.width / W;
    this.fit = minimapScale(bounds!);
    const { k, ox, oy } = this.fit;
    const ctx = this.canvas.getContext("2d")!;
    ctx.setTransform(1, 0, 0, 1, 0, 0);
    ctx.clearRect(0, 0, this.canvas.width, this.canvas.height);
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.fillStyle = "#ffffff";
    ctx.fillRect(0, 0, W, H);
    // each item a rectangle at least a pixel wide, in its gradient's colour (grey: not computed yet)
    const w = Math.max(1, NODE_W * k), hh = Math.max(1, NODE_H * k);
    // one path per colour, filled once: setting a fill style (parsed each time) and filling per item was most of
    // this draw at 2,500 items, and the ramp's rounded colours are far fewer than the items
    const byColour = new Map<string, number[]>();
    let n = 0;
    for (const it of v!.items.values()) {
      const p = pos.get(it.vid);
      if (!p) continue;
      const c = gradColor(itemGrad(it).grad);
      let xy = byColour.get(c);
      if (!xy) byColour.set(c, (xy = []));
      xy.push(ox + (p.x - NODE_W / 2) * k, oy + (p.y - NODE_H / 2) * k);
      n++;
    }
    for (const [c, xy] of byColour) {
      ctx.fillStyle = c;
      ctx.beginPath();
      for (let i = 0; i < xy.length; i += 2) ctx.rect(xy[i], xy[i + 1], w, hh);
      ctx.fill();
    }
    this.drawnItems = n;
    this.drawViewport();
  }

  private lastMove = 0;

  /** The view moved (pan, zoom): move the viewport's rectangle, at most every other animation frame (~30 Hz): even
   * a composited box costs the software compositor ~2 ms a frame during a pan (measured: 11.7 vs 13.2-14.1 ms of
   * renderer CPU per pan frame at 2,614 nodes without and with it). */
  moved(): void {
    if (!this.fit || this.frame) return;
    const tick = (now: number) => {
      if (now - this.lastMove < 30) { this.frame = requestAnimationFrame(tick); return; }
      this.frame = 0;
      this.lastMove = now;
      this.drawViewport();
    };
    this.frame = requestAnimationFrame(tick);
  }

  /** The viewport's rectangle in minimap pixels (CSS px of the canvas), or null when hidden. */
  viewportRect(): { x: number; y: number; w: number; h: number } | null {
    if (!this.fit) return null;
    const { tx, ty, k } = this.hooks.transform();
    const s = this.hooks.screen();
    const f = this.fit;
    // screen (0,0)-(w,h) is the drawing's (-tx/k, -ty/k)-((w-tx)/k, (h-ty)/k)
    return { x: f.ox + (-tx / k) * f.k, y: f.oy + (-ty / k) * f.k, w: (s.w / k) * f.k, h: (s.h / k) * f.k };
  }

  private drawViewport(): void {
    const r = this.viewportRect();
    if (!r) return;
    const size = `${r.w.toFixed(2)},${r.h.toFixed(2)}`;
    if (size !== this.viewSize) { // a zoom: a new size (a pan keeps it, and moves the box on the compositor)
      this.viewSize = size;
      this.view.style.width = `${r.w.toFixed(2)}px`;
      this.view.style.height = `${r.h.toFixed(2)}px`;
    }
    this.view.style.transform = `translate(${r.x.toFixed(2)}px,${r.y.toFixed(2)}px)`;
  }

  /** A minimap point (CSS px of the canvas) as a point of the drawing. */
  toDrawing(mx: number, my: number): Pos | null {
    if (!this.fit) return null;
    return { x: (mx - this.fit.ox) / this.fit.k, y: (my - this.fit.oy) / this.fit.k };
  }

  private attachPointer(): void {
    let dragging = false;
    const go = (e: PointerEvent) => {
      const r = this.box.getBoundingClientRect();
      const p = this.toDrawing(e.clientX - r.left, e.clientY - r.top);
      if (p) { this.hooks.centreAt(p); this.drawViewport(); }
    };
    const box = this.box;
    box.addEventListener("pointerdown", (e) => {
      e.stopPropagation(); // not a pan of the graph beneath
      dragging = true;
      box.setPointerCapture(e.pointerId);
      go(e);
    });
    box.addEventListener("pointermove", (e) => { if (dragging) go(e); });
    const end = () => { dragging = false; };
    box.addEventListener("pointerup", end);
    box.addEventListener("pointercancel", end);
    box.addEventListener("wheel", (e) => e.stopPropagation());
  }
}
