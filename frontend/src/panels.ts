// Side panels: inspector, legend, teaching step. Everything from events goes in as text.
import { ERROR_COLOUR, fmt, gradClass, gradColor, gradText, rampColor } from "./colors";
import { clear, h } from "./dom";
import { GRAD_CLASSES, GRAD_CLASS_ORDER, RAMP_LOG_MAX, RAMP_LOG_MIN, type GradClassName } from "./generated/summary";
import type { VItem, Visible } from "./groups";
import type { GNode, StepGraph } from "./state";
import type { Stats } from "./generated/events";
import { itemGrad, numbersText, shapeText } from "./view";

const bytes = (b: number | null): string =>
  b === null ? "—" : b < 1024 ? `${b} B` : b < 1 << 20 ? `${(b / 1024).toFixed(1)} KiB` : `${(b / (1 << 20)).toFixed(2)} MiB`;

function row(label: string, value: string | Node, cls = ""): HTMLElement {
  return h("div", { class: `row ${cls}` }, h("span", { class: "k" }, label), typeof value === "string" ? h("span", { class: "v" }, value) : value);
}

export function valuesBlock(vals: (number | null)[] | null | undefined, shape: number[], cls = "values"): HTMLElement | null {
  if (!vals || !vals.length) return null;
  const cols = shape.length >= 2 ? shape[shape.length - 1] : vals.length;
  const lines: string[] = [];
  for (let i = 0; i < vals.length; i += Math.max(1, cols)) {
    lines.push(vals.slice(i, i + Math.max(1, cols)).map((v) => (v === null ? "NaN/Inf" : fmt(v, 4))).join("  "));
  }
  return h("pre", { class: cls }, lines.join("\n"));
}

/** A flag line in its class's colour (the class table's legend text by default). */
function flag(c: GradClassName, text = GRAD_CLASSES[c].legend): HTMLElement {
  const el = h("div", { class: `flag ${c}` }, text);
  el.style.background = GRAD_CLASSES[c].colour;
  return el;
}

export function statsBlock(s: Stats | null | undefined, title: string, cls: string): HTMLElement {
  const cl = gradClass(s);
  const box = h("div", { class: `stats ${cls} grad-${cl}` }, h("div", { class: "stats-title" }, title));
  box.style.borderLeftColor = gradColor(s);
  const fill = GRAD_CLASSES[cl].fill;
  if (fill) box.style.background = fill;
  if (!s) {
    box.append(h("div", { class: "muted" }, "not computed yet"));
    return box;
  }
  // null means NaN/Inf only when the tensor has some; otherwise the emitter did not send that number
  const bad = (s.nan ?? 0) + (s.inf ?? 0) > 0;
  const f = (v: number | null | undefined): string => (v === null || v === undefined) && !bad ? "—" : fmt(v);
  box.append(
    row("norm", f(s.norm), "norm"),
    row("min / max", `${f(s.min)} / ${f(s.max)}`),
    row("mean", s.mean === undefined ? "—" : f(s.mean)), // absent: large, summarised without rtxviz._native
  );
  if ((s.nan ?? 0) || (s.inf ?? 0)) box.append(row("NaN / Inf", `${s.nan ?? 0} / ${s.inf ?? 0}`, "bad"));
  if (cl === "vanishing" || cl === "exploding") box.append(flag(cl));
  const v = valuesBlock(s.values, s.shape, "values grad-values");
  if (v) box.append(v);
  return box;
}

function nodeTitle(n: GNode): string {
  if (n.kind === "op") return n.recomputed ? `↻ ${n.op} (recomputed)` : n.op;
  return `${n.name ?? "(unnamed)"} · ${n.kind}`;
}

export function renderInspector(el: HTMLElement, it: VItem | null, graph: StepGraph | null, onToggle: (it: VItem) => void,
  onPick: (key: string) => void): void {
  clear(el);
  if (!it) {
    el.append(h("p", { class: "muted" }, "Click a node to inspect it. Double-click a group to open it."));
    return;
  }
  if (it.type !== "node") {
    const { grad, computed } = itemGrad(it);
    el.append(h("h3", {}, it.type === "fold" ? it.label : `group ${it.path ?? ""}`));
    el.append(row("nodes", String(it.count)), row("grads computed", `${computed} / ${it.count}`));
    if (it.foldRange) el.append(row("blocks", `${it.foldRange[0]} … ${it.foldRange[1]}`));
    const ops = new Map<string, number>();
    for (const m of it.members) ops.set(m.op, (ops.get(m.op) ?? 0) + 1);
    el.append(row("ops", [...ops].sort((a, b) => b[1] - a[1]).slice(0, 12).map(([o, c]) => `${o}×${c}`).join(", ")));
    el.append(statsBlock(grad, "most alarming gradient inside", "grad"));
    const btn = h("button", { class: "toggle", type: "button" }, it.type === "fold" ? "Unfold blocks" : "Expand group");
    btn.addEventListener("click", () => onToggle(it));
    el.append(btn);
    return;
  }
  const n = it.node!;
  el.append(h("h3", { class: "insp-title" }, nodeTitle(n)));
  el.append(row("kind", n.isRoot ? `${n.kind} (backward root)` : n.kind));
  if (n.kind === "op") el.append(row("op", n.op, "op"));
  if (n.rule) el.append(row("backward rule", h("code", { class: "rule" }, n.rule)));
  el.append(row("shape", shapeText(n.shape), "shape"), row("dtype", n.dtype), row("device", n.device));
  el.append(row("module", n.module ?? (n.group ?? "—")));
  if (n.kind === "op") el.append(row("saved for backward", bytes(n.savedBytes)));
  if (n.segment) {
    el.append(row("checkpoint", n.recomputed ? `segment #${n.segment}: recomputed in backward` :
      `segment #${n.segment}: its activations are dropped in forward and recomputed in backward`, "checkpoint"));
  }
  if (n.recomputed) {
    el.append(h("p", { class: "muted rc-note" }, `This ${n.op} ran again during backward: the checkpoint kept only the ` +
      "segment's input, so backward re-ran the segment's forward to get the values its gradient rules need."));
  }
  if (n.attrs && Object.keys(n.attrs).length) el.append(row("attrs", JSON.stringify(n.attrs).slice(0, 300)));
  if (n.anomaly) el.append(flag("nonfinite", `${n.origin ? "first NaN/Inf here: " : ""}${n.anomaly}`));
  if (n.error) {
    const e = h("div", { class: "flag error" }, `error in backward at this node: ${n.error}`);
    e.style.background = ERROR_COLOUR;
    el.append(e);
  }
  if (n.inputs.length && graph) {
    const list = h("div", { class: "inputs" });
    n.inputs.forEach((k, i) => {
      const src = k ? graph.nodes.get(k) : undefined;
      const a = h("a", { href: "#", class: "input-link" }, `${i}: ${src ? nodeTitle(src) + " " + shapeText(src.shape) : "(no grad)"}`);
      if (src) a.addEventListener("click", (e) => { e.preventDefault(); onPick(src.key); });
      list.append(a);
    });
    el.append(row("inputs", list));
  }
  const vals = valuesBlock(n.values, n.shape, "values node-values");
  el.append(h("div", { class: "stats-title" }, "value"), vals ?? h("div", { class: "muted" }, "values not sent (tensor larger than the emitter's limit)"));
  el.append(statsBlock(n.grad, `gradient: ${gradText(n.grad)}`, "grad"));
  if (n.inGrads) n.inGrads.forEach((g, i) => el.append(g ? statsBlock(g, `sent to input ${i}`, "in-grad") :
    h("div", { class: "stats in-grad" }, h("div", { class: "stats-title" }, `sent to input ${i}`), h("div", { class: "muted" }, "nothing: this input needs no gradient"))));
}

export function renderLegend(el: HTMLElement): void {
  clear(el);
  const stops = Array.from({ length: 11 }, (_, i) => `${rampColor(i / 10)} ${i * 10}%`).join(", ");
  el.append(h("div", { class: "legend-title" }, `${GRAD_CLASSES.ok.legend} (node border, edge colour and width)`));
  const bar = h("div", { class: "ramp" });
  bar.style.background = `linear-gradient(to right, ${stops})`;
  el.append(bar, h("div", { class: "ramp-labels" }, h("span", {}, `1e${RAMP_LOG_MIN}`),
    h("span", {}, `1e${(RAMP_LOG_MIN + RAMP_LOG_MAX) / 2}`), h("span", {}, `1e${RAMP_LOG_MAX}`)));
  const sw = (cls: string, color: string, text: string, dashed: string | null = null) => {
    const b = h("span", { class: `swatch ${cls}` });
    b.style.background = color;
    if (dashed) b.style.border = `2px dashed ${dashed}`;
    return h("span", { class: "legend-item" }, b, text);
  };
  // every class but "ok" (the ramp above), least to most alarming; "none" (not computed yet) is drawn dashed
  el.append(h("div", { class: "legend-items" }, ...GRAD_CLASS_ORDER.filter((c) => c !== "ok").map((c) => {
    const g = GRAD_CLASSES[c];
    return c === "none" ? sw(c, g.fill ?? "transparent", g.legend, g.colour) : sw(c, g.colour, g.legend);
  })));
  el.append(h("div", { class: "legend-items kinds" },
    sw("k-param", "#dbeafe", "parameter"), sw("k-input", "#dcfce7", "input"), sw("k-const", "#f1f5f9", "constant"),
    sw("k-op", "#ffffff", "op"), sw("k-output", "#ffedd5", "output / loss"), sw("k-group", "#ede9fe", "group (double-click)")));
  el.append(h("div", { class: "legend-items checkpoint" },
    sw("k-segment", "#fde68a", "checkpoint segment (activations dropped in forward)"),
    sw("k-recompute", "#fef9c3", "↻ op recomputed in backward"),
    sw("k-recomputing-seg", "#fb923c", "segment recomputing (backward is re-running it)"),
    sw("k-recomputed-seg", "#bbf7d0", "segment recomputed")));
  el.append(h("div", { class: "legend-items marks" },
    sw("k-origin", "#fee2e2", "first NaN/Inf (where it started)"),
    sw("k-error", ERROR_COLOUR, "backward raised here (error)"),
    sw("k-replayed", "#ffffff", "replayed from the graph cache", "#15803d")));
}

/** The part of a backward rule about input `j` ("dA = dC · B, dB = dC · A" has one per input), or all of it. */
export function rulePart(rule: string | null, j: number, inputs: number): string {
  if (!rule) return "(no rule text)";
  const parts = rule.split(/,\s*(?=d[A-Z]\b)/);
  return parts.length === inputs ? parts[j] : rule;
}

/** The chain rule at one input, with the engine's numbers: the rule, then upstream gradient · local derivative,
 * then the product the engine sent (three value lists from the grad event; nothing is computed here). */
export function chainRuleText(rule: string, upstream: (number | null)[], local: (number | null)[],
  product: (number | null)[]): string {
  return `${rule}\n  = ${numbersText(upstream)} · ${numbersText(local)}\n  = ${numbersText(product)}`;
}

function valueName(src: GNode | undefined): string {
  if (!src) return "(needs no grad)";
  return src.kind === "op" ? `${src.op} ${shapeText(src.shape)}` : `${src.name ?? src.kind} ${shapeText(src.shape)}`;
}

/** Where a value fans out, its gradient is the sum of what each use sent back: "1 (add, input 0) + 1 (add, input
 * 1) = 2", with the engine's numbers (each arrival, and the total it sent as the value's gradient). */
export function arrivalsText(graph: StepGraph, n: GNode): string | null {
  if (n.arrivals.length < 2 || !n.grad?.values) return null;
  const parts: string[] = [];
  for (const a of n.arrivals) {
    if (!a.stats.values) return null;
    const from = graph.nodes.get(a.from);
    parts.push(`${numbersText(a.stats.values)} (from ${from?.op ?? "?"}, input ${a.index})`);
  }
  return `${n.arrivals.length} uses, so its gradient is the sum of their arrivals:\n  ${parts.join("\n+ ")}\n= ${numbersText(n.grad.values)}`;
}

/** Teaching mode: one backward node, its rule, the gradient it received and what it sent to each input; for
 * small elementwise ops the chain rule written out with the numbers the engine sent. */
export function renderTeach(el: HTMLElement, graph: StepGraph, i: number): void {
  clear(el);
  const total = graph.gradSteps.length;
  if (!total) {
    el.append(h("p", { class: "muted" }, "No backward pass in this step yet: run loss.backward() to step through it."));
    return;
  }
  const stepInfo = graph.gradSteps[Math.min(i, total - 1)];
  const n = graph.nodes.get(stepInfo.key)!;
  el.append(h("div", { class: "teach-pos" }, `backward node ${Math.min(i, total - 1) + 1} of ${total}`));
  el.append(h("h3", { class: "teach-op" }, `${n.op} ${shapeText(n.shape)}`));
  el.append(row("local rule", h("code", { class: "rule" }, n.rule ?? "(no rule text)")));
  el.append(statsBlock(n.grad, "incoming gradient dL/d(output)", "teach-in"));
  const sum = arrivalsText(graph, n);
  if (sum) el.append(h("pre", { class: "teach-sum" }, `This value has ${sum}`));
  n.inputs.forEach((k, j) => {
    const src = k ? graph.nodes.get(k) : undefined;
    const name = valueName(src);
    const g = n.inGrads ? n.inGrads[j] : null;
    el.append(g || !n.inGrads ? statsBlock(g, `→ input ${j}: ${name}`, "teach-out") :
      h("div", { class: "stats teach-out" }, h("div", { class: "stats-title" }, `→ input ${j}: ${name}`), h("div", { class: "muted" }, "nothing: this input needs no gradient")));
    const loc = n.local?.[j];
    if (loc && g?.values && n.grad?.values) {
      el.append(h("pre", { class: "teach-chain", "data-input": j }, chainRuleText(rulePart(n.rule, j, n.inputs.length), n.grad.values, loc, g.values)));
    }
    if (src && src.kind !== "op") {
      const total = arrivalsText(graph, src);
      if (total && n.inputs.indexOf(k) === j) el.append(h("pre", { class: "teach-sum" }, `${src.name ?? "this input"} has ${total}`));
    }
  });
}

/** Forward teaching: the op recorded at forward position `i`, its inputs' values and the value it made. */
export function renderForward(el: HTMLElement, graph: StepGraph, i: number, total: number): void {
  clear(el);
  if (!total) {
    el.append(h("p", { class: "muted" }, "No op recorded in this step yet."));
    return;
  }
  const key = graph.forwardSteps[Math.min(i, total - 1)]?.key;
  const n = key ? graph.nodes.get(key) : undefined;
  el.append(h("div", { class: "teach-pos" }, `forward op ${Math.min(i, total - 1) + 1} of ${total}`));
  if (!n) return;
  el.append(h("h3", { class: "teach-op" }, `${n.op} ${shapeText(n.shape)}`));
  const ins = n.inputs.map((k, j) => {
    const src = k ? graph.nodes.get(k) : undefined;
    const v = src?.values ? numbersText(src.values) : "(values not sent)";
    return `input ${j}: ${src ? (src.kind === "op" ? src.op : src.name ?? src.kind) : "?"} = ${v}`;
  });
  el.append(h("pre", { class: "teach-fwd-in" }, ins.join("\n")));
  el.append(h("pre", { class: "teach-fwd-out" }, `${n.op}(…) = ${n.values ? numbersText(n.values) : "(values not sent: tensor larger than the emitter's limit)"}`));
}

export function visibleCount(v: Visible): number {
  return v.items.size;
}
