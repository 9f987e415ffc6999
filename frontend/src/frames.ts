// The frame loop: events queue up as they arrive and are applied once per animation frame, then what changed is
// drawn. While a recorded run's stored events are still arriving (up to the hello's last seq) drawing waits, at
// most a second at a time.
import type { RunEvent } from "./generated/events";
import type { Metrics } from "./metrics";
import type { RunModel } from "./state";

export interface FrameHooks {
  model(): RunModel | null;
  /** After a batch: the live view moves to the newest step. */
  follow(): void;
  /** Whether the structure to draw changed without new events. */
  dirty(): boolean;
  draw(): void;
}

export class Frames {
  /** The stream's last seq when it opened: the stored events before it are drawn once they are all in. */
  replayUntil = 0;
  private pending: RunEvent[] = [];
  private queued = false;
  private lastDraw = 0;

  constructor(private metrics: Metrics, private hooks: FrameHooks) {}

  /** A new run: what was queued for the old one is dropped. */
  reset(): void {
    this.pending = [];
  }

  push(evs: RunEvent[]): void {
    for (const ev of evs) this.pending.push(ev);
    this.queue();
  }

  queue(): void {
    if (this.queued) return;
    this.queued = true;
    requestAnimationFrame(() => this.frame());
  }

  private frame(): void {
    this.queued = false;
    const model = this.hooks.model();
    if (!model) return;
    const batch = this.pending;
    this.pending = [];
    const metrics = this.metrics;
    let maxSeq = metrics.drawnSeq;
    for (const ev of batch) {
      model.apply(ev);
      if (typeof ev.seq === "number" && ev.seq > maxSeq) maxSeq = ev.seq;
    }
    this.hooks.follow();
    const catchingUp = model.lastSeq < this.replayUntil && performance.now() - this.lastDraw < 1000;
    if ((batch.length || this.hooks.dirty()) && !catchingUp) {
      this.hooks.draw();
      this.lastDraw = performance.now();
    }
    metrics.frames++;
    metrics.drawnSeq = maxSeq;
    if (batch.length) {
      const log = metrics.drawLog;
      log.push([performance.now(), maxSeq]);
      if (log.length > 5000) log.splice(0, log.length - 5000);
      const now = Date.now() / 1000;
      const lat = metrics.latencies;
      for (const ev of batch) if (typeof ev.t === "number") lat.push((now - ev.t) * 1000);
      if (lat.length > 20000) lat.splice(0, lat.length - 20000);
    }
  }
}
