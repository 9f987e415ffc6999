// The layout worker: runs dagre (a layered DAG layout) on the visible graph, off the main thread. The page only
// sends graphs within its layout budget; anything larger keeps the incremental placement. A checkpoint node with
// its recomputed nodes arrives as one larger box (place.ts layoutInput), so the segment stays together.
import * as dagre from "@dagrejs/dagre";

export interface LayoutRequest {
  id: number;
  nodes: { id: string; w: number; h: number }[];
  edges: { from: string; to: string }[];
}

export interface LayoutReply {
  id: number;
  ok: boolean;
  ms: number;
  pos?: Record<string, { x: number; y: number }>;
  error?: string;
}

/** Lay out `req` with dagre; positions are node centres. Pure (no worker globals), so it is unit-tested. */
export function layoutGraph(req: LayoutRequest): Record<string, { x: number; y: number }> {
  const g = new dagre.graphlib.Graph();
  g.setGraph({ rankdir: "TB", nodesep: 24, ranksep: 48, marginx: 0, marginy: 0 });
  g.setDefaultEdgeLabel(() => ({}));
  for (const n of req.nodes) g.setNode(n.id, { width: n.w, height: n.h });
  for (const e of req.edges) if (g.hasNode(e.from) && g.hasNode(e.to)) g.setEdge(e.from, e.to);
  dagre.layout(g);
  const pos: Record<string, { x: number; y: number }> = {};
  for (const n of req.nodes) {
    const p = g.node(n.id);
    pos[n.id] = { x: Math.round(p.x), y: Math.round(p.y) };
  }
  return pos;
}

if (typeof self !== "undefined" && typeof (self as { importScripts?: unknown }).importScripts === "function") {
  self.onmessage = (msg: MessageEvent<LayoutRequest>) => {
    const req = msg.data;
    const t0 = performance.now();
    let reply: LayoutReply;
    try {
      reply = { id: req.id, ok: true, ms: performance.now() - t0, pos: layoutGraph(req) };
    } catch (err) {
      // dagre recurses: a deep chain can overflow the stack; the page keeps its incremental placement then
      reply = { id: req.id, ok: false, ms: performance.now() - t0, error: String(err) };
    }
    (self as unknown as Worker).postMessage(reply);
  };
}
