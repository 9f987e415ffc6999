// One run's events: its WebSocket (resuming after the last seq on reconnect), or in the exported page the events
// the page carries; and the events of an older step, on demand.
import { Stream, type Api, type RunInfo } from "./api";
import { $ } from "./dom";
import { EMBEDDED, HOSTED } from "./env";
import type { RunEvent } from "./generated/events";
import { keepRecentSteps, listenToHost } from "./hosted";

export interface FeedSink {
  /** The run's name, and its last seq when the stream opened (the stored events arrive before it is drawn). */
  hello(name: string, lastSeq: number): void;
  /** `until`: the seq the post these events are part of ends at, when more of it is on its way (hub.py). */
  events(evs: RunEvent[], until?: number): void;
  status(text: string): void;
}

export class RunFeed {
  private stream: Stream | null = null;
  /** The exported page's events, every step. */
  private exported: RunEvent[] = [];
  private exportedName = "";
  /** The notebook widget's frame: stops listening to the host window. */
  private unlisten: (() => void) | null = null;

  constructor(private api: Api) {}

  /** The exported page's run, read from `#rtxviz-run` (throws when it is not JSON). */
  readExported(): RunInfo {
    const data = JSON.parse($("#rtxviz-run").textContent ?? "") as { run?: RunInfo; events?: RunEvent[] };
    const events = Array.isArray(data.events) ? data.events : [];
    const run: RunInfo = { id: "exported", name: "exported run", ...(data.run ?? {}) };
    run.n_events = events.length;
    this.exported = events;
    this.exportedName = run.name || run.id;
    return run;
  }

  open(runId: string, lastSeq: () => number, sink: FeedSink): void {
    this.stream?.close();
    if (EMBEDDED) {
      sink.hello(this.exportedName, this.exported.reduce((m, e) => Math.max(m, e.seq ?? 0), 0));
      sink.events(this.exported.slice());
      this.unlisten?.();
      if (HOSTED) {
        let seen = this.exported.reduce((m, e) => Math.max(m, e.seq ?? 0), 0);
        this.unlisten = listenToHost((batch) => {
          const evs = batch.filter((e) => (e.seq ?? 0) > seen); // the host re-sends after a reload of the frame
          if (!evs.length) return;
          seen = evs[evs.length - 1].seq ?? seen;
          this.exported = keepRecentSteps(this.exported, evs); // what the step picker can bring back
          sink.events(evs);
        }, (text) => sink.status(text));
      }
      return;
    }
    const u = new URL(location.href);
    u.searchParams.set("run", runId);
    history.replaceState(null, "", u.toString());
    this.stream = new Stream(
      (after) => this.api.wsUrl(`/api/runs/${encodeURIComponent(runId)}/ws`, { after }),
      (m) => {
        if (m.type === "hello" && m.run) sink.hello(m.run.name || m.run.id, m.last_seq ?? 0);
        else if (m.type === "events") sink.events(m.events, m.until);
      },
      (st, why) => sink.status(st === "open" ? "connected" : `disconnected (${why ?? ""}), retrying`),
      lastSeq,
    );
  }

  /** Every event of one step that the page no longer holds. */
  stepEvents(runId: string, step: number): Promise<RunEvent[]> {
    if (EMBEDDED) return Promise.resolve(this.exported.filter((e) => e.step === step));
    return this.api.stepEvents(runId, step);
  }
}
