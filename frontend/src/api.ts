// Talking to the server: REST under /api and the run's WebSocket. The token comes from ?token= in the page URL,
// else from this tab's session storage, else a prompt when the server answers 401.
import type { RunEvent } from "./generated/events";
import type { Me } from "./owners";

/** A run as the server lists it (GET /api/runs, the lobby WebSocket). */
export interface RunInfo {
  id: string;
  name: string;
  created?: number;
  updated?: number;
  status?: string;
  n_events?: number;
  dropped?: number;
  last_step?: number | null;
  /** The user who created the run on a class server (null: the admin token, or a server without accounts). */
  owner?: string | null;
}

/** GET /api/runs/{id}/history: columns, one entry per recorded step (rtxviz/web/routers/history.py). */
export interface HistoryData {
  steps: number[];
  grad_norm: (number | null)[];
  update_ratio: (number | null)[];
  nonfinite: number[];
}

// The server was started with a token (`rtxviz serve --token ...` or RTXVIZ_TOKEN); it does not print it.
const TOKEN_ASK = "This rtxviz server needs the access token it was started with (rtxviz serve --token, or RTXVIZ_TOKEN):";
const TOKEN_REFUSED = "The server refused that token. Type the token it was started with (rtxviz serve --token, or RTXVIZ_TOKEN):";
const TOKEN_TRIES = 3;

export class Api {
  token: string | null;
  constructor(private base = "") {
    const q = new URLSearchParams(location.search).get("token");
    let stored: string | null = null;
    try { stored = sessionStorage.getItem("rtxviz-token"); } catch { /* storage blocked (e.g. a file:// page) */ }
    this.token = q ?? stored;
    if (q !== null) {
      // Keep the token in this tab's session storage, out of the address bar, history and shared links.
      try { sessionStorage.setItem("rtxviz-token", q); } catch { /* storage blocked */ }
      const u = new URL(location.href);
      u.searchParams.delete("token");
      history.replaceState(null, "", u.toString());
    }
  }

  /** GET with the token; on 401 ask for it, and again (saying so) while the server refuses what was typed. */
  private async get(path: string): Promise<Response> {
    for (let attempt = 0; attempt < TOKEN_TRIES; attempt++) {
      const headers: Record<string, string> = {};
      if (this.token) headers.Authorization = `Bearer ${this.token}`;
      const r = await fetch(this.base + path, { headers });
      if (r.status !== 401) return r;
      const t = window.prompt(attempt === 0 && !this.token ? TOKEN_ASK : TOKEN_REFUSED);
      if (!t) return r;
      this.token = t.trim();
      try { sessionStorage.setItem("rtxviz-token", this.token); } catch { /* storage blocked */ }
    }
    throw new Error("unauthorised: the server refused the token; reload the page to try again");
  }

  async runs(): Promise<RunInfo[]> {
    const r = await this.get("/api/runs");
    if (!r.ok) throw new Error(`GET /api/runs: ${r.status}`);
    return (await r.json()) as RunInfo[];
  }

  /** Who the token is (GET /api/me); null from a server older than accounts. */
  async me(): Promise<Me | null> {
    const r = await this.get("/api/me");
    if (!r.ok) return null;
    return (await r.json()) as Me;
  }

  /** Every event of one step (paged), for steps the page no longer holds. */
  async stepEvents(runId: string, step: number): Promise<RunEvent[]> {
    const out: RunEvent[] = [];
    let after = 0;
    for (;;) {
      const r = await this.get(`/api/runs/${encodeURIComponent(runId)}/events?step=${step}&after=${after}&limit=10000`);
      if (!r.ok) throw new Error(`events: ${r.status}`);
      const page = (await r.json()) as { events: RunEvent[]; more: boolean; next_after: number | null };
      out.push(...page.events);
      if (!page.more || page.next_after === null) return out;
      after = page.next_after;
    }
  }

  /** One value's gradient norm and update/weight ratio over the run's steps (GET /api/runs/{id}/history). */
  async history(runId: string, name: string): Promise<HistoryData> {
    const r = await this.get(`/api/runs/${encodeURIComponent(runId)}/history?name=${encodeURIComponent(name)}`);
    if (!r.ok) throw new Error(`history: ${r.status}`);
    return (await r.json()) as HistoryData;
  }

  wsUrl(path: string, params: Record<string, string | number> = {}): string {
    const u = new URL(this.base + path, location.href);
    u.protocol = u.protocol === "https:" ? "wss:" : "ws:";
    for (const [k, v] of Object.entries(params)) u.searchParams.set(k, String(v));
    if (this.token) u.searchParams.set("token", this.token);
    return u.toString();
  }
}

export type WsMessage =
  | { type: "hello"; v: number; run?: RunInfo; runs?: RunInfo[]; last_seq?: number }
  | { type: "events"; run_id: string; first_seq: number; replay: boolean; events: RunEvent[]; until?: number }
  | { type: "runs"; run: RunInfo };

/** A WebSocket that reconnects (resuming after the last seq it saw). */
export class Stream {
  private ws: WebSocket | null = null;
  private closed = false;
  private retry = 500;
  constructor(
    private url: (after: number) => string,
    private onMessage: (m: WsMessage) => void,
    private onState: (s: "open" | "closed" | "error", why?: string) => void,
    private lastSeq: () => number,
  ) {
    this.open();
  }

  private open(): void {
    if (this.closed) return;
    const ws = new WebSocket(this.url(this.lastSeq()));
    this.ws = ws;
    ws.onopen = () => { this.retry = 500; this.onState("open"); };
    ws.onmessage = (e) => {
      let m: WsMessage;
      try { m = JSON.parse(e.data as string) as WsMessage; } catch { return; }
      this.onMessage(m);
    };
    ws.onclose = (e) => {
      this.onState("closed", e.reason || `code ${e.code}`);
      if (!this.closed && e.code !== 1008) {
        setTimeout(() => this.open(), this.retry);
        this.retry = Math.min(5000, this.retry * 2);
      }
    };
  }

  close(): void {
    this.closed = true;
    this.ws?.close();
  }
}
