// The selection and the inspector panel: what the clicked node (or group) is, its values and gradients.
import { $ } from "./dom";
import type { GraphPane } from "./graph";
import type { VItem } from "./groups";
import { renderInspector } from "./panels";
import { savedSection } from "./saved";
import type { StepGraph } from "./state";

export class Inspector {
  /** The selected visible id, or null. */
  selected: string | null = null;
  /** A node was selected (the deep link follows it). */
  onSelect: (vid: string) => void = () => {};
  /** More sections under the inspected item (the history's sparklines, normhistory.ts). */
  extra: (el: HTMLElement, it: VItem | null) => void = () => {};

  constructor(private pane: GraphPane, private graph: () => StepGraph | null, private toggle: (it: VItem) => void) {}

  select(vid: string): void {
    this.selected = vid;
    this.pane.view.selected = vid;
    this.pane.redraw();
    this.render();
    this.onSelect(vid);
  }

  /** Select a node by its key (its group, when it is collapsed). */
  selectKey(key: string): void {
    this.select(this.pane.vidOf(key));
  }

  render(): void {
    const it = this.selected ? this.pane.item(this.selected) : null;
    const body = $("#inspector-body");
    const g = this.graph();
    renderInspector(body, it, g, (x) => this.toggle(x), (k) => this.selectKey(k));
    const saved = it && g ? savedSection(it, g) : null;
    if (saved) body.append(saved);
    this.extra(body, it);
  }
}
