// A node's SVG children, updated in place: when a gradient arrives (or a value, a class) only the attributes and
// texts that changed are written, instead of removing the node's children and building them again; a live run
// colours every node as backward reaches it, and rebuilding ~8 elements per node per frame was most of a
// frame's time. The children are rebuilt only when the node's make-up changes (a badge appears, the labels are
// built for a near view, a group's count line).
import { s } from "./dom";
import { NODE_H, NODE_W } from "./place";

/** What one node shows; view.ts computes it from the item. */
export interface NodeSpec {
  rx: number;
  stroke: string;
  strokeWidth: number;
  dashed: boolean;
  group: boolean; // a group or a fold: a second rect behind it, like a stack
  recomputed: boolean; // the ring of a node recomputed in backward
  title: string;
  sub: string;
  tip: string;
  badge: { cls: string; text: string; width: number; fill: string; textFill: string } | null;
  count: string | null; // a group's "3/12 grads" line
}

interface Parts {
  key: string;
  last: Map<string, string | null>;
  body: SVGRectElement;
  t1?: SVGTextElement;
  t2?: SVGTextElement;
  tip?: SVGTitleElement;
  badge?: SVGRectElement;
  badgeText?: SVGTextElement;
  count?: SVGTextElement;
}


/** What a new node element shares with many others (finitely many values each): the node's own attributes that
 * say its kind and gradient class, and its outline's corner radius and dash. */
export interface NodeLook {
  cls: string;
  gradClass: string;
  kind: string;
  numbers: boolean;
  rx: number;
  dashed: boolean;
  group: boolean;
  recomputed: boolean;
}

/** The attributes of the node's own element as last written (drawNode skips a write that changes nothing). */
export interface NodeAttrs { cls: string; gradClass: string; kind: string; numbers: boolean }

export interface PartsHolder extends SVGGElement { _parts?: Parts; _attrs?: NodeAttrs }

/** One template per look: a new node is a deep clone of its look's template, its class, data attributes, outline
 * and (for a group or a recomputed node) its stack or ring already in place, so that only what is the node's own
 * (its id, key, position, gradient colour and width) is written per node: "expand all" of 2,500 nodes made ~10
 * attribute calls per node before, most of them writing what every node of its kind writes. */
const templates = new Map<string, PartsHolder>();
const TEMPLATES_MAX = 256; // looks combine kinds, classes and flags: a few dozen in practice

const partsKey = (group: boolean, recomputed: boolean, detail: boolean, badge: boolean, count: boolean): string =>
  `${group}|${recomputed}|${detail}|${badge}|${count}`;

/** A new node element for visible id `vid`, drawn as `look`'s outline (drawNodeParts writes the rest). */
export function newNodeEl(vid: string, look: NodeLook): PartsHolder {
  const key = `${look.cls}|${look.gradClass}|${look.kind}|${look.numbers}|${look.rx}|${look.dashed}|${look.group}|${look.recomputed}`;
  let t = templates.get(key);
  if (!t) {
    if (templates.size >= TEMPLATES_MAX) templates.clear();
    t = s("g", { class: look.cls, "data-grad-class": look.gradClass, "data-kind": look.kind, "data-numbers": look.numbers ? "1" : null });
    const body = s("rect", { class: "body", width: NODE_W, height: NODE_H, rx: look.rx, "stroke-dasharray": look.dashed ? DASH : null });
    t.append(body);
    addFixedParts(t, look.group, look.recomputed);
    const last = new Map<string, string | null>([["rx", String(look.rx)], ["dash", look.dashed ? DASH : null]]);
    t._parts = { key: partsKey(look.group, look.recomputed, false, false, false), last, body };
    t._attrs = { cls: look.cls, gradClass: look.gradClass, kind: look.kind, numbers: look.numbers };
    templates.set(key, t);
  }
  const el = t.cloneNode(true) as PartsHolder;
  el._parts = { key: t._parts!.key, last: new Map(t._parts!.last), body: el.firstElementChild as SVGRectElement };
  el._attrs = { ...t._attrs! };
  el.setAttribute("data-vid", vid);
  return el;
}

const DASH = "5 4";

/** Draw `spec` into the node element `el`: its outline always, its labels, tooltip and badge when `detail`. */
export function drawNodeParts(el: PartsHolder, spec: NodeSpec, detail: boolean): void {
  const key = partsKey(spec.group, spec.recomputed, detail, detail && spec.badge !== null, detail && spec.count !== null);
  let p = el._parts;
  if (!p || p.key !== key) p = el._parts = build(el, spec, detail, key);
  const attr = (k: string, e: Element, name: string, v: string | null): void => {
    if (p!.last.get(k) === v) return;
    p!.last.set(k, v);
    if (v === null) e.removeAttribute(name); else e.setAttribute(name, v);
  };
  const text = (k: string, e: Element, v: string): void => {
    if (p!.last.get(k) === v) return;
    p!.last.set(k, v);
    e.textContent = v;
  };
  attr("rx", p.body, "rx", String(spec.rx));
  attr("stroke", p.body, "stroke", spec.stroke);
  attr("sw", p.body, "stroke-width", String(spec.strokeWidth));
  attr("dash", p.body, "stroke-dasharray", spec.dashed ? DASH : null);
  if (p.t1) text("t1", p.t1, spec.title);
  if (p.t2) text("t2", p.t2, spec.sub);
  if (p.tip) text("tip", p.tip, spec.tip);
  const b = spec.badge;
  if (b && p.badge && p.badgeText) {
    attr("bcls", p.badge, "class", `badge badge-${b.cls}`);
    attr("bx", p.badge, "x", String(NODE_W + 4 - b.width));
    attr("bw", p.badge, "width", String(b.width));
    attr("bfill", p.badge, "fill", b.fill);
    attr("btcls", p.badgeText, "class", `badge-text badge-${b.cls}`);
    attr("btx", p.badgeText, "x", String(NODE_W + 4 - b.width / 2));
    text("bt", p.badgeText, b.text);
    if (p.last.get("btfill") !== b.textFill) {
      p.last.set("btfill", b.textFill);
      p.badgeText.style.fill = b.textFill; // an inline style: the stylesheet's fill would win over an attribute
    }
  }
  if (p.count && spec.count !== null) text("count", p.count, spec.count);
}

/** The node's children for its make-up, with the attributes that never change; drawNodeParts sets the rest. */
function build(el: PartsHolder, spec: NodeSpec, detail: boolean, key: string): Parts {
  // the outline stays (newNodeEl made it); everything after it is built for the new make-up
  let body = el._parts?.body ?? (el.firstElementChild as SVGRectElement | null);
  if (!body || body.getAttribute("class") !== "body") {
    while (el.firstChild) el.removeChild(el.firstChild);
    body = s("rect", { class: "body", width: NODE_W, height: NODE_H });
    el.append(body);
  }
  while (body.nextSibling) el.removeChild(body.nextSibling);
  const p: Parts = { key, last: new Map(), body };
  addFixedParts(el, spec.group, spec.recomputed);
  if (!detail) return p;
  p.t1 = s("text", { class: "l1", x: NODE_W / 2, y: 17 });
  p.t2 = s("text", { class: "l2", x: NODE_W / 2, y: 33 });
  p.tip = s("title", {});
  el.append(p.t1, p.t2, p.tip);
  if (spec.badge) {
    // above the node's top edge, so it never sits on the title
    p.badge = s("rect", { y: -15, height: 14, rx: 7 });
    p.badgeText = s("text", { y: -4.5 });
    el.append(p.badge, p.badgeText);
  }
  if (spec.count !== null) {
    p.count = s("text", { class: "grad-count", x: 6, y: NODE_H + 12 });
    el.append(p.count);
  }
  return p;
}

/** A group's stack behind its outline; a recomputed node's ring. */
function addFixedParts(el: SVGGElement, group: boolean, recomputed: boolean): void {
  if (group) el.append(s("rect", { class: "stack", x: 4, y: -4, width: NODE_W, height: NODE_H, rx: 6 }));
  if (recomputed) el.append(s("rect", { class: "rc-ring", x: -4, y: -4, width: NODE_W + 8, height: NODE_H + 8, rx: 9 }));
}
