// Teaching mode: walk the backward pass one node at a time (buttons or arrow keys); the graph is shown as it was
// when that node's gradient arrived, and the panel shows its rule, what it received and what it sent.
import { $ } from "./dom";
import type { GraphPane } from "./graph";
import type { History } from "./history";
import type { Inspector } from "./inspector";
import { renderForward, renderTeach } from "./panels";
import type { StepGraph } from "./state";

export class Teacher {
  on = false;
  /** Walk the forward pass (values appearing op by op) or the backward pass (gradients node by node). */
  mode: "forward" | "backward" = "backward";
  private index = 0;

  constructor(private history: History, private pane: GraphPane, private inspector: Inspector, private draw: () => void) {
    $("#teach-btn").addEventListener("click", () => this.set(!(this.on && this.mode === "backward"), "backward"));
    $("#teach-fwd-btn").addEventListener("click", () => this.set(!(this.on && this.mode === "forward"), "forward"));
    $("#teach-prev").addEventListener("click", () => this.to(this.index - 1));
    $("#teach-next").addEventListener("click", () => this.to(this.index + 1));
    document.addEventListener("keydown", (e) => {
      if (!this.on || (e.target as Element).tagName === "INPUT") return;
      if (e.key === "ArrowRight") this.to(this.index + 1);
      if (e.key === "ArrowLeft") this.to(this.index - 1);
    });
  }

  set(on: boolean, mode: "forward" | "backward" = this.mode): void {
    this.on = on;
    this.mode = mode;
    $("#teach").hidden = !on;
    $("#teach-btn").classList.toggle("on", on && mode === "backward");
    $("#teach-fwd-btn").classList.toggle("on", on && mode === "forward");
    if (!on) { this.pane.view.focus = null; return; }
    this.history.setPlaying(false);
    this.to(0);
  }

  /** Go to the i-th node the backward pass reached (clamped). */
  to(i: number): void {
    const h = this.history;
    if (!h.model || !h.key) return;
    const full = h.model.record(h.key)?.graph;
    if (!full) return;
    const steps = this.mode === "forward" ? full.forwardSteps : full.gradSteps;
    const n = steps.length;
    this.index = Math.max(0, Math.min(i, Math.max(0, n - 1)));
    if (n) {
      const st = steps[this.index];
      h.seek(st.index + 1);
      const vid = this.pane.vidOf(st.key);
      this.pane.view.focus = vid;
      this.inspector.selected = vid;
      this.pane.view.selected = vid;
    } else h.seek(h.cursor);
    this.draw();
    this.inspector.render();
  }

  /** The panel, for the whole shown step (`shown` when the step is gone). */
  render(shown: StepGraph): void {
    if (!this.on) return;
    const h = this.history;
    const g = h.model?.record(h.key ?? "")?.graph ?? shown;
    if (this.mode === "forward") renderForward($("#teach-body"), g, this.index, g.forwardSteps.length);
    else renderTeach($("#teach-body"), g, this.index);
  }
}
