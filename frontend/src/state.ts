// Graph state: the events of one step reduced into nodes, leaves, gradients, checkpoint segments and cache
// counters. Pure data (no DOM), so it is unit-tested under node and replayed for the timeline.
// Event types come from src/generated/events.ts (the pydantic schema): core kinds are read through their types,
// so a field the schema renames fails the build; `checkpoint` and `graph_cache` are generic (free fields).
import {
  asCore, asGeneric, type CoreRunEvent, type EventOf, type GenericRunEvent, type Ref, type RunEvent, type SavedTensor,
  type Stats, type Stored,
} from "./generated/events";

export type NodeKind = "op" | "param" | "input" | "const";

/** A drawn graph value: an op's output or a leaf. `key` is structural (module|op|ordinal), so the same node of
 * the next training step gets the same key, hence the same place on screen. */
export interface GNode {
  key: string;
  kind: NodeKind;
  id: number; // TapeNode id, or leaf id
  op: string; // op name; for leaves "param" / "input" / "const"
  name: string | null; // leaf name
  inputs: string[]; // keys of the inputs, in order ("" where an input is not drawn)
  shape: number[];
  dtype: string;
  device: string;
  module: string | null;
  group: string | null; // module path used for grouping
  rule: string | null;
  attrs: Record<string, unknown> | null;
  savedBytes: number | null;
  /** What the node keeps for backward, tensor by tensor (node event `saved`; null: not sent). See saved.ts. */
  saved: SavedTensor[] | null;
  values: (number | null)[] | null;
  requiresGrad: boolean;
  grad: Stats | null; // dL/d(this value); null: not computed yet
  inGrads: (Stats | null)[] | null; // what this node's backward sent to each input
  /** d(output)/d(input i) at this node's inputs, from the engine (grad event `local`; small elementwise ops). */
  local: ((number | null)[] | null)[] | null;
  gradOrder: number; // position in the backward pass (-1: none yet)
  segment: number | null; // checkpoint segment ordinal (within the step)
  recomputed: boolean;
  /** For a recomputed node: the key of its segment's checkpoint node (drawn next to it, inside the segment). */
  anchor: string | null;
  isRoot: boolean; // a backward root (the loss)
  anomaly: string | null;
  origin: boolean; // the first NaN/Inf producer
  /** The backward that raised here (an in-place write to a saved tensor, AnomalyError): its message. */
  error: string | null;
  /** The gradients that arrived at this value from its consumers' backward, in order (where a value fans out,
   * its gradient is their sum): which consumer (key), through which of its inputs, and what. */
  arrivals: { from: string; index: number; stats: Stats }[];
  /** A leaf's `grad` is its one arrival so far, not yet the leaf_grad the engine sends at the end of backward. */
  provisional: boolean;
  seq: number;
}

export interface Segment {
  ordinal: number; // 1, 2, ... within the step
  id: number; // engine segment id
  name: string;
  state: "forward" | "saved" | "recomputing" | "recomputed";
  ops: number;
  savedBytes: number;
  nodeKey: string | null; // the node recorded for the whole segment
}

export interface CacheCounters {
  hits: number;
  misses: number;
  evictions: number;
  last: "hit" | "miss" | "evict" | null;
}

/** The last graph-cache event: which function, which step (null: outside training steps, e.g. evaluation). */
export interface CacheEvent {
  action: "hit" | "miss" | "evict";
  fn: string | null;
  key: string | null;
  ops: number | null;
  step: number | null;
}

export interface AnomalyInfo {
  phase: string;
  op: string;
  key: string | null;
  message: string;
  origin: boolean;
  /** "error": the backward raised at this node; "nonfinite" (or absent): NaN/Inf. */
  reason: "nonfinite" | "error";
}

export interface LeafInfo {
  id: number;
  name: string | null;
  shape: number[];
  dtype: string;
  device: string;
  requiresGrad: boolean;
  param: boolean;
  values: (number | null)[] | null;
}

/** Leaves are announced once per run (parameters are reused by every step): the run keeps them. */
export type LeafTable = Map<number, LeafInfo>;

/** "failed": a backward raised (an anomaly event with reason "error" came before its end); "interrupted": the step
 * ended while a backward had begun and not ended (an emitter that died, or one older than the error events). */
export type BackwardState = "none" | "running" | "done" | "failed" | "interrupted";

type Of<K extends CoreRunEvent["kind"]> = Stored<EventOf<K>>;

// Readers for typed fields: the parameter types follow the schema (a field whose type changes fails the build),
// and a value that is absent or of another type at run time still reads as null.
function str(v: string | null | undefined): string | null {
  return typeof v === "string" ? v : null;
}
function num(v: number | null | undefined): number | null {
  return typeof v === "number" ? v : null;
}
function arr<T>(v: readonly T[] | null | undefined): T[] | null {
  return Array.isArray(v) ? (v as T[]) : null;
}
// ... and for the free fields of generic events
function anyStr(v: unknown): string | null {
  return typeof v === "string" ? v : null;
}
function anyNum(v: unknown): number | null {
  return typeof v === "number" ? v : null;
}

/** Cache events: the engine emits kind `graph_cache` with `action` = capture | hit | miss | evict. */
export function cacheKind(ev: RunEvent): "hit" | "miss" | "evict" | null {
  const g = asGeneric(ev);
  if (!g || g.kind !== "graph_cache") return null;
  const w = anyStr(g.action);
  if (w === "hit" || w === "miss" || w === "evict") return w;
  return null;
}

/** The graph of one step, built by applying that step's events in order. */
export class StepGraph {
  readonly step: number | null;
  readonly nodes = new Map<string, GNode>();
  readonly byNodeId = new Map<number, string>();
  readonly byLeafId = new Map<number, string>();
  readonly segments: Segment[] = [];
  readonly cache: CacheCounters = { hits: 0, misses: 0, evictions: 0, last: null };
  readonly anomalies: AnomalyInfo[] = [];
  /** Keys in the order backward reached them (teaching mode walks this), with the event's index. */
  readonly gradSteps: { key: string; index: number }[] = [];
  /** Keys of forward ops (not recomputations) in the order they were recorded, with the event's index. */
  readonly forwardSteps: { key: string; index: number }[] = [];
  backward: BackwardState = "none";
  /** Bumped whenever nodes or edges are added (layout must look again); colours alone do not bump it. */
  structureVersion = 0;
  /** Bumped on every applied event. */
  version = 0;
  applied = 0;
  private ordinals = new Map<string, number>();
  private segById = new Map<number, Segment>();
  private forwardSeg: Segment | null = null;
  private recomputeSeg: Segment | null = null;
  /** Unnamed leaves seen while recomputing (the detached copies of the segment's inputs), in order. */
  private recomputeLeaves = 0;
  /** Nesting of backward passes: a checkpoint's recomputation runs its own backward inside the outer one. */
  private backwardDepth = 0;
  /** A backward of this step raised (an anomaly with reason "error"). */
  private failed = false;

  constructor(step: number | null, private leaves: LeafTable) {
    this.step = step;
  }

  /** Apply one event; returns whether anything visible changed. */
  apply(event: RunEvent): boolean {
    this.applied++;
    this.version++;
    const ev = asCore(event);
    if (!ev) return this.applyGeneric(event as GenericRunEvent);
    switch (ev.kind) {
      case "node":
        this.addNode(ev);
        return true;
      case "grad":
        return this.addGrad(ev);
      case "leaf_grad": {
        const key = this.byLeafId.get(num(ev.leaf) ?? -1);
        const n = key ? this.nodes.get(key) : undefined;
        if (!n) return false;
        n.grad = ev.stats ?? null;
        n.provisional = false;
        if (n.gradOrder < 0) n.gradOrder = this.gradSteps.length;
        return true;
      }
      case "backward_begin": {
        this.backwardDepth++;
        this.backward = "running";
        // the inner backward of a recomputed segment has the segment's output as root, not the loss
        if (this.recomputeSeg || this.backwardDepth > 1) return true;
        for (const r of arr(ev.roots) ?? []) {
          const k = this.refKey(r);
          const n = k ? this.nodes.get(k) : undefined;
          if (n) n.isRoot = true;
        }
        return true;
      }
      case "backward_end":
        this.backwardDepth = Math.max(0, this.backwardDepth - 1);
        if (this.backwardDepth === 0) this.backward = this.failed ? "failed" : "done";
        return true;
      case "step_end":
        if (this.backward === "running") this.backward = this.failed ? "failed" : "interrupted";
        this.backwardDepth = 0;
        return true;
      case "anomaly": {
        const nid = num(ev.node);
        const key = nid !== null ? this.byNodeId.get(nid) ?? null : null;
        const info: AnomalyInfo = {
          phase: str(ev.phase) ?? "?",
          op: str(ev.op) ?? "?",
          key,
          message: str(ev.message) ?? "",
          origin: ev.origin === true,
          reason: ev.reason === "error" ? "error" : "nonfinite",
        };
        this.anomalies.push(info);
        const n = key ? this.nodes.get(key) : undefined;
        if (info.reason === "error") {
          this.failed = true;
          if (n) n.error = info.message || `${info.phase} error`;
          return true;
        }
        if (n) {
          n.anomaly = info.message || `${info.phase} NaN/Inf`;
          if (info.origin) n.origin = true;
        }
        return true;
      }
      default:
        return false;
    }
  }

  /** The engine's `checkpoint` and `graph_cache` events (not modelled in the schema: free fields). */
  private applyGeneric(ev: GenericRunEvent): boolean {
    if (ev.kind === "checkpoint") return this.checkpoint(ev);
    const c = cacheKind(ev);
    if (c === null) return false;
    if (c === "hit") this.cache.hits++;
    else if (c === "miss") this.cache.misses++;
    else this.cache.evictions++;
    this.cache.last = c;
    return true;
  }

  refKey(r: Ref | null | undefined): string | null {
    if (!r) return null;
    if (typeof r.node === "number") return this.byNodeId.get(r.node) ?? null;
    if (typeof r.leaf === "number") return this.byLeafId.get(r.leaf) ?? null;
    return null;
  }

  private addLeaf(leafId: number, consumerKey: string, index: number, consumerGroup: string | null): string {
    const known = this.byLeafId.get(leafId);
    if (known) return known;
    const info = this.leaves.get(leafId);
    const name = info?.name ?? null;
    const alias = this.recomputeAlias(info, name);
    if (alias) {
      // the recomputation starts from a detached copy of the segment's input: draw it as that input, not as a
      // new leaf (it holds the same values)
      this.byLeafId.set(leafId, alias);
      return alias;
    }
    const param = !!info && (info.param || (info.requiresGrad && name !== null));
    const kind: NodeKind = param ? "param" : info && info.requiresGrad ? "input" : name ? "input" : "const";
    // named leaves keep their name as key across steps; unnamed ones are keyed by where they are used
    const key = name ? `L:${name}` : `L:${consumerKey}#${index}`;
    let group: string | null = null;
    if (param && name && name.includes(".")) group = name.slice(0, name.lastIndexOf("."));
    else if (kind === "const") group = consumerGroup;
    const n: GNode = {
      key, kind, id: leafId, op: kind, name, inputs: [], shape: info?.shape ?? [], dtype: info?.dtype ?? "?",
      device: info?.device ?? "?", module: null, group, rule: null, attrs: null, savedBytes: null, saved: null,
      values: info?.values ?? null, requiresGrad: info?.requiresGrad ?? false, grad: null, inGrads: null, local: null,
      gradOrder: -1, segment: null, recomputed: false, anchor: null, isRoot: false, anomaly: null, origin: false, error: null,
      arrivals: [], provisional: false, seq: -1,
    };
    this.byLeafId.set(leafId, key);
    this.nodes.set(key, n);
    return key;
  }

  /** While recomputing, the k-th unnamed leaf that needs grad is the copy of the segment's k-th non-parameter
   * input (the checkpoint node's inputs, parameters left out). */
  private recomputeAlias(info: LeafInfo | undefined, name: string | null): string | null {
    const rc = this.recomputeSeg;
    if (!rc || !rc.nodeKey || name !== null || (info && (info.param || !info.requiresGrad))) return null;
    const ck = this.nodes.get(rc.nodeKey);
    if (!ck) return null;
    const data = ck.inputs.filter((k) => k && this.nodes.get(k)?.kind !== "param");
    const k = this.recomputeLeaves++;
    return data[k] ?? null;
  }

  private addNode(ev: Of<"node">): void {
    const id = num(ev.id) ?? -1;
    const op = str(ev.op) ?? "?";
    const module = str(ev.module);
    const rc = this.recomputeSeg;
    const base = `${rc ? `rc${rc.ordinal}:` : ""}${module ?? ""}|${op}`;
    const ord = (this.ordinals.get(base) ?? 0) + 1;
    this.ordinals.set(base, ord);
    const key = `${base}|${ord}`;
    const refs = arr(ev.inputs) ?? [];
    const inputs: string[] = new Array<string>(refs.length);
    for (let i = 0; i < refs.length; i++) {
      const r = refs[i];
      inputs[i] = r && typeof r.node === "number" ? this.byNodeId.get(r.node) ?? ""
        : r && typeof r.leaf === "number" ? this.addLeaf(r.leaf, key, i, module) : "";
    }
    let segment: number | null = null;
    if (rc) segment = rc.ordinal;
    else if (op === "checkpoint" && this.forwardSeg) {
      segment = this.forwardSeg.ordinal;
      this.forwardSeg.nodeKey = key;
    }
    // recomputed nodes are grouped with their checkpoint node, so they collapse and lay out with it
    const anchor = rc ? rc.nodeKey : null;
    const group = rc && anchor ? this.nodes.get(anchor)?.group ?? null : module;
    const n: GNode = {
      key, kind: "op", id, op, name: null, inputs, shape: arr<number>(ev.shape) ?? [], dtype: str(ev.dtype) ?? "?",
      device: str(ev.device) ?? "?", module, group, rule: str(ev.rule), attrs:
        (ev.attrs && typeof ev.attrs === "object" ? ev.attrs : null) as Record<string, unknown> | null,
      savedBytes: num(ev.saved_bytes), saved: arr(ev.saved), values: arr<number | null>(ev.values), requiresGrad: true, grad: null,
      inGrads: null, local: null, gradOrder: -1, segment, recomputed: !!rc, anchor, isRoot: false, anomaly: null, origin: false,
      error: null, arrivals: [], provisional: false, seq: num(ev.seq) ?? -1,
    };
    this.byNodeId.set(id, key);
    this.nodes.set(key, n);
    if (!rc && this.backward === "none") this.forwardSteps.push({ key, index: this.applied - 1 });
    this.structureVersion++;
  }

  private addGrad(ev: Of<"grad">): boolean {
    const key = this.byNodeId.get(num(ev.node) ?? -1);
    const n = key ? this.nodes.get(key) : undefined;
    if (!n || !key) return false;
    n.grad = ev.output ?? null;
    n.inGrads = arr(ev.inputs);
    n.local = arr(ev.local);
    n.gradOrder = this.gradSteps.length;
    const sent = n.inGrads ?? [];
    for (let i = 0; i < sent.length; i++) {
      const st = sent[i];
      const src = st ? this.nodes.get(n.inputs[i] ?? "") : undefined;
      if (!src || !st) continue;
      src.arrivals.push({ from: key, index: i, stats: st });
      // a leaf hears of its gradient only at the end of backward (leaf_grad): until then its one arrival is it,
      // so stepping through backward does not show a coloured edge into a leaf that says "not computed"
      if (src.kind !== "op" && (src.grad === null || src.provisional)) {
        src.grad = src.arrivals.length === 1 ? st : null;
        src.provisional = src.grad !== null;
      }
    }
    this.gradSteps.push({ key, index: this.applied - 1 });
    return true;
  }

  private checkpoint(ev: GenericRunEvent): boolean {
    const phase = anyStr(ev.phase);
    const id = anyNum(ev.segment) ?? -1;
    let seg = this.segById.get(id);
    if (phase === "begin") {
      seg = {
        ordinal: this.segments.length + 1, id, name: anyStr(ev.name) ?? "segment", state: "forward", ops: 0,
        savedBytes: 0, nodeKey: null,
      };
      this.segments.push(seg);
      this.segById.set(id, seg);
      this.forwardSeg = seg;
      return true;
    }
    if (!seg) return false;
    if (phase === "end") {
      seg.state = "saved";
      seg.ops = anyNum(ev.ops) ?? seg.ops;
      seg.savedBytes = anyNum(ev.saved_bytes) ?? 0;
      if (this.forwardSeg === seg) this.forwardSeg = null;
    } else if (phase === "recompute_begin") {
      seg.state = "recomputing";
      this.recomputeSeg = seg;
      this.recomputeLeaves = 0;
    } else if (phase === "recompute_end") {
      seg.state = "recomputed";
      if (this.recomputeSeg === seg) this.recomputeSeg = null;
    } else return false;
    return true;
  }
}

/** The leaf table update for a `leaf` event (run level). */
export function leafFromEvent(ev: Of<"leaf">): LeafInfo {
  return {
    id: num(ev.id) ?? -1,
    name: str(ev.name),
    shape: arr(ev.shape) ?? [],
    dtype: str(ev.dtype) ?? "?",
    device: str(ev.device) ?? "?",
    requiresGrad: ev.requires_grad === true,
    param: ev.param === true,
    values: arr(ev.values),
  };
}

export const stepKey = (step: number | null | undefined): string => (typeof step === "number" ? String(step) : "-");

export interface StepRecord {
  step: number | null;
  events: RunEvent[];
  graph: StepGraph;
  firstSeq: number;
  complete: boolean;
}

/** A run's events, held as a few recent steps (older ones are dropped; the server keeps them all). */
export class RunModel {
  readonly leaves: LeafTable = new Map();
  readonly steps = new Map<string, StepRecord>();
  readonly order: string[] = [];
  /** Every step number seen (small: numbers only), for the step picker. */
  readonly allSteps: (number | null)[] = [];
  /** Steps the emitter did not record (`sample_every`): their step_begin said `sampled: false`. */
  readonly unsampled = new Set<number>();
  /** The run records every k-th step (run_start's sample_every). */
  sampleEvery = 1;
  /** The run's `lesson` event (sent by `rtxviz lesson`: its text, title, the next lesson), free fields. */
  lesson: GenericRunEvent | null = null;
  readonly totals: CacheCounters = { hits: 0, misses: 0, evictions: 0, last: null };
  lastCache: CacheEvent | null = null;
  lastSeq = 0;
  eventCount = 0;
  dropped = 0;
  name = "";
  ended = false;
  constructor(public keepSteps = 4) {}

  /** Apply one event; returns the key of the step it went to (or null for run-level events). */
  apply(ev: RunEvent): string | null {
    this.eventCount++;
    if (typeof ev.seq === "number") this.lastSeq = Math.max(this.lastSeq, ev.seq);
    const core = asCore(ev);
    switch (core?.kind) {
      case "leaf": {
        const l = leafFromEvent(core);
        this.leaves.set(l.id, l);
        return null;
      }
      case "run_start":
        this.name = str(core.name) ?? this.name;
        this.sampleEvery = num(core.sample_every) ?? 1;
        return null;
      case "step_begin":
        if (core.sampled === false && typeof core.step === "number") this.unsampled.add(core.step);
        break;
      case "run_end":
        this.ended = true;
        return null;
      case "dropped":
        this.dropped = num(core.total) ?? this.dropped;
        return null;
    }
    const g = asGeneric(ev);
    if (g && g.kind === "lesson") {
      this.lesson = g;
      return null;
    }
    const c = g ? cacheKind(g) : null;
    if (g && c) {
      if (c === "hit") this.totals.hits++;
      else if (c === "miss") this.totals.misses++;
      else this.totals.evictions++;
      this.totals.last = c;
      this.lastCache = { action: c, fn: anyStr(g.fn), key: anyStr(g.key), ops: anyNum(g.ops), step: typeof g.step === "number" ? g.step : null };
    }
    const key = stepKey(ev.step);
    let rec = this.steps.get(key);
    if (!rec) {
      if (ev.kind === "step_end") return null;
      const step = typeof ev.step === "number" ? ev.step : null;
      rec = { step, events: [], graph: new StepGraph(step, this.leaves), firstSeq: ev.seq ?? 0, complete: false };
      this.steps.set(key, rec);
      this.order.push(key);
      this.allSteps.push(step);
      this.evict();
    }
    if (ev.kind === "step_end") rec.complete = true;
    rec.events.push(ev);
    rec.graph.apply(ev);
    return key;
  }

  latestKey(): string | null {
    return this.order.length ? this.order[this.order.length - 1] : null;
  }

  /** Drop the oldest steps beyond `keepSteps`, but never the newest one with a graph: with sampling
   *  (`sample_every=k`) the k-1 unsampled steps after it hold only their boundaries, and the live view (and a run
   *  that has ended) must still have a graph to show. */
  private evict(): void {
    const keep = this.latestWithNodes();
    while (this.order.length > this.keepSteps) {
      const i = this.order[0] === keep ? 1 : 0;
      this.steps.delete(this.order.splice(i, 1)[0]);
    }
  }

  /** The newest step whose graph has nodes (a cache-hit step may have none). */
  latestWithNodes(): string | null {
    for (let i = this.order.length - 1; i >= 0; i--) {
      if (this.steps.get(this.order[i])!.graph.nodes.size) return this.order[i];
    }
    return null;
  }

  /** For a step that replayed a cached graph and so recorded no nodes: the nearest earlier step held here whose
   * graph was recorded (the capture the replay runs). Null when the step has nodes, had no hit, or none is held. */
  replaySource(key: string): StepRecord | null {
    const rec = this.steps.get(key);
    if (!rec || rec.graph.nodes.size || !rec.graph.cache.hits) return null;
    const held = this.order.map((k) => this.steps.get(k)!).filter((r) => r.graph.nodes.size &&
      r.step !== null && rec.step !== null && r.step < rec.step);
    held.sort((a, b) => (b.step ?? 0) - (a.step ?? 0));
    return held[0] ?? null;
  }

  record(key: string): StepRecord | undefined {
    return this.steps.get(key);
  }

  /** Rebuild a step's graph from its first `count` events (the timeline's cursor). */
  replay(key: string, count: number): StepGraph | null {
    const rec = this.steps.get(key);
    if (!rec) return null;
    const g = new StepGraph(rec.step, this.leaves);
    const n = Math.min(count, rec.events.length);
    for (let i = 0; i < n; i++) g.apply(rec.events[i]);
    return g;
  }

  /** Put a step fetched from the server (older than what is kept) in place. */
  loadStep(step: number | null, events: RunEvent[]): string {
    const key = stepKey(step);
    const rec: StepRecord = {
      step, events: [], graph: new StepGraph(step, this.leaves), firstSeq: events[0]?.seq ?? 0, complete: true,
    };
    for (const ev of events) {
      const core = asCore(ev);
      if (core?.kind === "leaf") this.leaves.set(num(core.id) ?? -1, leafFromEvent(core));
      rec.events.push(ev);
      rec.graph.apply(ev);
    }
    if (!this.steps.has(key)) this.order.unshift(key);
    this.steps.set(key, rec);
    return key;
  }
}

/** The banner over the graph after a graph-cache event: what was cached and where (an evaluation under no_grad
 * runs outside the training steps, so its hit is not "this step"). */
export function cacheBadgeText(ev: CacheEvent | null, last: string | null, shownStep: number | null): string {
  // the name with its signature ("Model.forward([32, 64] float32)"): cut at "(" it no longer says for which input
  // shapes; only the enclosing function of a local one goes ("train.<locals>.evaluate" is "evaluate")
  const full = ev ? ev.fn ?? ev.key ?? "" : "";
  const at = full.lastIndexOf("<locals>.");
  const name = at >= 0 ? full.slice(at + "<locals>.".length) : full;
  const fn = ev ? (name ? (name.includes("(") ? name : `${name}()`) : "a function()") : null;
  const where = ev && ev.step !== null && ev.step === shownStep ? "in this step" : ev && ev.step !== null ? `in step ${ev.step}` : "outside the training steps";
  const ops = ev?.ops ? `, ${ev.ops} ops` : "";
  if (last === "hit") return fn ? `↻ graph cache hit: ${fn} replayed its cached graph${ops} ${where}, nothing re-recorded` :
    "↻ graph cache hit: the cached graph was replayed";
  if (last === "miss") return fn ? `● graph cache miss: ${fn} ran and its graph was recorded ${where}` : "● graph cache miss: graph recorded";
  return "";
}
