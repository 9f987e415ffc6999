// What the page measures about itself, read by the benchmarks and the browser tests (window.__rtxviz.metrics).
export interface Metrics {
  drawnSeq: number;
  frames: number;
  latencies: number[]; // ms from an event's emission (ev.t) to the frame that drew it
  firstRenderMs: number | null;
  layoutMs: number | null;
  layouts: number;
  layoutsCancelled: number;
  drawLog: [number, number][]; // (performance.now(), last seq drawn) per frame that drew something
}

export function newMetrics(): Metrics {
  return { drawnSeq: 0, frames: 0, latencies: [], firstRenderMs: null, layoutMs: null, layouts: 0, layoutsCancelled: 0, drawLog: [] };
}
