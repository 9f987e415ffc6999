// The frame loop: events are applied to the run's state as they arrive (in the message's own task, not in the
// next animation frame), and once per animation frame what changed is drawn; a batch of thousands of events (a
// burst, a recorded run's stored events) is drawn at once, without waiting for that frame. While a recorded run's
// stored events are still arriving (up to the hello's last seq) drawing waits, at most a second at a time; so it
// does while a large post's parts are (the server commits and sends it in parts, each message saying the seq the
// post ends at: `until`), at most HOLD_MS after the first: one draw of the whole post instead of one per part,
// each of which would lay out everything received so far (a draw costs in the size of the graph, not the part's).
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

/** A batch of at least this many events is drawn as soon as it is applied (see push). */
export const DRAW_NOW_EVENTS = 2000;
/** How long the parts of one post are applied without drawing, waiting for the rest (a part lost, or a server
 * that stores slowly, shows what came once this has passed). */
export const HOLD_MS = 1000;

export class Frames {
  /** The stream's last seq when it opened: the stored events before it are drawn once they are all in. */
  replayUntil = 0;
  /** Events that came while no run was open yet: applied in the next frame that has one. */
  private pending: RunEvent[] = [];
  /** Events applied and not yet drawn (the next frame draws them and records their latency). */
  private applied: RunEvent[] = [];
  private queued = false;
  private lastDraw = 0;
  /** The seq the post being received ends at (its messages' `until`), and until when drawing waits for it. */
  private holdUntil = 0;
  private holdEnds = 0;
  private holdTimer: ReturnType<typeof setTimeout> | null = null;

  constructor(private metrics: Metrics, private hooks: FrameHooks) {}

  /** A new run: what was queued for the old one is dropped. */
  reset(): void {
    this.pending = [];
    this.applied = [];
    this.holdUntil = 0;
    this.clearHoldTimer();
  }

  /** `until`: the seq the post `evs` are part of ends at, when more of it is coming (the hub's message says). */
  push(evs: RunEvent[], until?: number): void {
    if (until !== undefined && until > this.holdUntil) {
      if (!this.holding()) this.holdEnds = performance.now() + HOLD_MS; // a new hold (not one already running)
      this.holdUntil = until;
    }
    const model = this.hooks.model();
    try {
      if (model) {
        for (const ev of evs) {
          model.apply(ev);
          this.applied.push(ev);
        }
      } else for (const ev of evs) this.pending.push(ev);
    } finally {
      // what was applied is drawn even if an event could not be; a batch this big is drawn now, in the
      // message's own task: waiting for the next animation frame (measured 16-30 ms after a 13,000-event
      // message's parse and apply) only delays it, since no other message can join it before that frame
      if (this.holding()) this.wakeAtHoldEnd();
      else if (this.applied.length >= DRAW_NOW_EVENTS) this.frame(); else this.queue();
    }
  }

  /** Whether drawing waits for the rest of a post (its last seq not applied yet, and HOLD_MS not passed). */
  private holding(): boolean {
    const model = this.hooks.model();
    return model !== null && model.lastSeq < this.holdUntil && performance.now() < this.holdEnds;
  }

  private wakeAtHoldEnd(): void {
    if (this.holdTimer !== null) return;
    this.holdTimer = setTimeout(() => { this.holdTimer = null; this.frame(); },
      Math.max(0, this.holdEnds - performance.now()));
  }

  private clearHoldTimer(): void {
    if (this.holdTimer !== null) { clearTimeout(this.holdTimer); this.holdTimer = null; }
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
    for (const ev of this.pending) { model.apply(ev); this.applied.push(ev); }
    this.pending = [];
    if (this.holding()) { this.wakeAtHoldEnd(); return; } // the rest of the post is right behind
    this.clearHoldTimer();
    const batch = this.applied;
    this.applied = [];
    const metrics = this.metrics;
    let maxSeq = metrics.drawnSeq;
    for (const ev of batch) if (typeof ev.seq === "number" && ev.seq > maxSeq) maxSeq = ev.seq;
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
