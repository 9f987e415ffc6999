// DOM helpers. Text from events only ever goes in through textContent (never innerHTML), so a tensor named
// `<img src=x onerror=alert(1)>` shows as those characters.
const SVG_NS = "http://www.w3.org/2000/svg";

type Attrs = Record<string, string | number | boolean | null | undefined>;

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K, attrs: Attrs = {}, ...children: (Node | string | null | undefined)[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  for (const c of children) if (c !== null && c !== undefined) el.append(typeof c === "string" ? document.createTextNode(c) : c);
  return el;
}

export function s<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Attrs = {}, text?: string): SVGElementTagNameMap[K] {
  const el = document.createElementNS(SVG_NS, tag) as SVGElementTagNameMap[K];
  setAttrs(el, attrs);
  if (text !== undefined) el.textContent = text;
  return el;
}

// for...in, not Object.entries: no array per element (a fully expanded 5,000-node graph creates ~40,000 elements)
function setAttrs(el: Element, attrs: Attrs): void {
  for (const k in attrs) {
    const v = attrs[k];
    if (v === null || v === undefined || v === false) continue;
    // handlers are added with addEventListener; "on..." would be an inline handler
    if (k.charCodeAt(0) === 111 && k.charCodeAt(1) === 110) throw new Error("no inline handlers");
    el.setAttribute(k, v === true ? "" : typeof v === "string" ? v : String(v));
  }
}

export function clear(el: Element): void {
  while (el.firstChild) el.removeChild(el.firstChild);
}

export function $(sel: string): HTMLElement {
  const el = document.querySelector(sel);
  if (!el) throw new Error(`missing element ${sel}`);
  return el as HTMLElement;
}
