// Saved tensors: what each node keeps for its backward (the node events' `saved` list), the activation memory it
// adds, totals per module (group), and the memory a checkpoint segment saved. Pure functions for the numbers (unit
// tested under node), then the inspector's list and the toolbar toggle that puts the bytes on the graph.
import { h } from "./dom";
import type { SavedTensor } from "./generated/events";
import type { VItem } from "./groups";
import type { GNode, Segment, StepGraph } from "./state";

/** Bytes as a reader takes them: 512 B, 1.5 KiB, 12.0 MiB. */
export function bytesText(b: number): string {
  if (b < 1024) return `${b} B`;
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let v = b / 1024;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) { v /= 1024; u++; }
  return `${v.toFixed(v < 10 ? 2 : 1)} ${units[u]}`;
}

/** One saved tensor as the inspector lists it: what it is, and whether it adds activation memory here. */
export interface SavedRow {
  /** "input 0", "output", "state 1". */
  slot: string;
  /** What the slot holds: the input's node or leaf title ("x", "matmul #3"), "" for output and state. */
  of: string;
  bytes: number;
  shape: number[];
  dtype: string;
  /** Counted in this node's activation bytes: not a leaf (a parameter or data input is held anyway) and not an
   * alias of a buffer saved before (counted where it was first saved in this step, or held across steps). */
  counted: boolean;
  /** Why not counted, or null. */
  note: string | null;
}

function slotName(role: string, index: number | undefined): string {
  return role === "output" ? "output" : `${role} ${index ?? 0}`;
}

/** The node key of the node event id `id` in `g`, if this step recorded it. */
function nodeKeyOf(g: StepGraph, id: number): string | null {
  return g.byNodeId.get(id) ?? null;
}

/** The rows of `n`'s saved tensors (empty when the event carried no `saved` list). */
export function savedRows(n: GNode, g: StepGraph): SavedRow[] {
  return (n.saved ?? []).map((t: SavedTensor) => {
    const input = t.role === "input" ? g.nodes.get(n.inputs[t.index ?? 0] ?? "") : undefined;
    const leaf = !!input && input.kind !== "op";
    let note: string | null = null;
    if (leaf) note = input.kind === "param" ? "a parameter: held anyway" : "a leaf (data): held anyway";
    else if (t.alias) {
      const k = nodeKeyOf(g, t.alias.node);
      const slot = slotName(t.alias.role, t.alias.index);
      // a node this step did not record saved the buffer first: it outlived that step (data, a cache), so it is
      // no activation of this one, and the node it names is on no page of this step
      note = k === n.key ? `same buffer as this node's ${slot}`
        : k ? `same buffer as ${g.nodes.get(k)?.op ?? "node"} #${t.alias.node}'s ${slot}`
        : `held across steps: first saved as node #${t.alias.node}'s ${slot}, before this step`;
    }
    const of = input ? (input.kind === "op" ? `${input.op} #${input.id}` : input.name ?? input.kind) : "";
    return { slot: slotName(t.role, t.index), of, bytes: t.bytes, shape: t.shape, dtype: t.dtype, counted: note === null, note };
  });
}

/** The activation bytes `n` adds: its saved tensors that are neither leaves nor aliases; an event without the
 * `saved` list (an older emitter, rtxviz.torch) counts its `saved_bytes`. Leaves save nothing. */
export function activationBytes(n: GNode, g: StepGraph): number {
  if (n.kind !== "op") return 0;
  if (!n.saved) return n.savedBytes ?? 0;
  let b = 0;
  for (const r of savedRows(n, g)) if (r.counted) b += r.bytes;
  return b;
}

/** An item's activation bytes: a node's own, a group's or fold's summed over its members. */
export function itemSavedBytes(it: VItem, g: StepGraph): number {
  if (it.node) return activationBytes(it.node, g);
  let b = 0;
  for (const m of it.members) b += activationBytes(m, g);
  return b;
}

/** What a checkpoint segment did to memory: `kept` (its inputs, held by the checkpoint node), `dropped` (what its
 * ops saved when recomputed in backward, i.e. what they would have held from forward to backward without the
 * checkpoint; null until recomputed), `saved` = dropped - kept (null until known). */
export function segmentMemory(g: StepGraph, seg: Segment): { kept: number; dropped: number | null; saved: number | null } {
  let dropped = 0;
  let any = false;
  for (const n of g.nodes.values()) {
    if (!n.recomputed || n.segment !== seg.ordinal) continue;
    any = true;
    dropped += activationBytes(n, g);
  }
  const kept = seg.savedBytes;
  return any ? { kept, dropped, saved: dropped - kept } : { kept, dropped: null, saved: null };
}

/** The step's totals: activation bytes of the forward (recomputed nodes not counted: they hold their tensors only
 * during backward) and what checkpointing saved over all segments recomputed so far. */
export function stepTotals(g: StepGraph): { activations: number; checkpointSaved: number } {
  let activations = 0;
  for (const n of g.nodes.values()) if (!n.recomputed) activations += activationBytes(n, g);
  let checkpointSaved = 0;
  for (const seg of g.segments) checkpointSaved += segmentMemory(g, seg).saved ?? 0;
  return { activations, checkpointSaved };
}

/** The inspector's "saved for backward" section for an item (null: nothing to say). */
export function savedSection(it: VItem, g: StepGraph): HTMLElement | null {
  const box = h("div", { class: "saved-list" });
  if (!it.node) {
    const total = itemSavedBytes(it, g);
    box.append(h("div", { class: "saved-total", "data-bytes": String(total) }, `saved for backward inside: ${bytesText(total)}`));
    const top = it.members.filter((m) => m.kind === "op").map((m) => [m, activationBytes(m, g)] as const)
      .filter(([, b]) => b > 0).sort((a, b) => b[1] - a[1]).slice(0, 5);
    for (const [m, b] of top) box.append(h("div", { class: "saved-row" }, `${m.op} #${m.id} ${m.module ?? ""}: ${bytesText(b)}`));
    return box;
  }
  const n = it.node;
  if (n.kind !== "op") return null;
  const rows = savedRows(n, g);
  const own = activationBytes(n, g);
  box.append(h("div", { class: "saved-total", "data-bytes": String(own) },
    `activation memory added: ${bytesText(own)}${n.saved ? "" : " (no per-tensor list from this emitter)"}`));
  for (const r of rows) {
    const line = h("div", { class: `saved-row${r.counted ? "" : " not-counted"}`, "data-slot": r.slot, "data-bytes": String(r.bytes) },
      `${r.slot}${r.of ? ` (${r.of})` : ""}: ${bytesText(r.bytes)} · (${r.shape.join(", ")}) ${r.dtype}`);
    if (r.note) line.append(h("span", { class: "muted saved-note" }, ` — ${r.note}`));
    box.append(line);
  }
  const seg = n.op === "checkpoint" && n.segment !== null ? g.segments.find((s) => s.ordinal === n.segment) : undefined;
  if (seg) {
    const m = segmentMemory(g, seg);
    box.append(h("div", { class: "saved-checkpoint", "data-saved": m.saved === null ? "" : String(m.saved) },
      m.saved === null ? `checkpoint keeps ${bytesText(m.kept)}; what it drops is known once backward recomputes it` :
        `checkpointing saved ${bytesText(Math.max(0, m.saved))}: its ${seg.ops} ops would have kept ${bytesText(m.dropped!)} ` +
        `until backward; it kept ${bytesText(m.kept)}`));
  }
  return box;
}

/** What the toggle needs of the page. */
export interface SavedToggleHooks {
  graph(): StepGraph | null;
  /** Show (a function giving each item's bytes) or hide (null) the badges, and draw again. */
  show(bytesOf: ((it: VItem) => number) | null): void;
}

/** The toolbar's "saved for backward" toggle: badges on the graph and the step's totals beside it. */
export class SavedToggle {
  private readonly box = document.querySelector("#saved-toggle") as HTMLInputElement;
  private readonly summary = document.querySelector("#saved-summary") as HTMLElement;

  constructor(private hooks: SavedToggleHooks) {
    this.box.addEventListener("change", () => this.apply());
  }

  get on(): boolean {
    return this.box.checked;
  }

  private apply(): void {
    this.hooks.show(this.on ? (it) => { const g = this.hooks.graph(); return g ? itemSavedBytes(it, g) : 0; } : null);
    this.refresh();
  }

  /** The totals of the shown step again (a new event, another step). */
  refresh(): void {
    const g = this.hooks.graph();
    this.summary.hidden = !this.on || !g;
    if (!this.on || !g) return;
    const t = stepTotals(g);
    this.summary.dataset.activations = String(t.activations);
    this.summary.dataset.checkpointSaved = String(t.checkpointSaved);
    this.summary.textContent = `activations kept for backward: ${bytesText(t.activations)}` +
      (g.segments.length ? ` · checkpointing saved ${bytesText(Math.max(0, t.checkpointSaved))}` : "");
  }
}
