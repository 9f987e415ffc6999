// Gradient norm -> class, colour and width. Thresholds, classes, colours, words and the ramp all come from
// src/generated/summary.ts (rtxviz/summary/classes.py, the table the SVG drawings use); nothing is restated here.
import type { Stats } from "./generated/events";
import { EXPLODING, GRAD_CLASSES, RAMP, RAMP_LOG_MAX, RAMP_LOG_MIN, VANISHING, type GradClassName } from "./generated/summary";

export type GradClass = GradClassName;

export function gradClass(s: Stats | null | undefined): GradClass {
  if (!s) return "none";
  if ((s.nan ?? 0) > 0 || (s.inf ?? 0) > 0 || s.norm === null || !Number.isFinite(s.norm)) return "nonfinite";
  if (s.norm === 0) return "zero";
  if (s.norm < VANISHING) return "vanishing";
  if (s.norm > EXPLODING) return "exploding";
  return "ok";
}

/** Position of a norm on the ramp, 0..1 (log10 scale from the vanishing to the exploding threshold). */
export function rampT(norm: number): number {
  const l = Math.log10(Math.max(norm, 1e-30));
  return Math.min(1, Math.max(0, (l - RAMP_LOG_MIN) / (RAMP_LOG_MAX - RAMP_LOG_MIN)));
}

export function rampColor(t: number): string {
  const x = Math.min(1, Math.max(0, t)) * (RAMP.length - 1);
  const i = Math.min(RAMP.length - 2, Math.floor(x));
  const f = x - i;
  const c = RAMP[i].map((v, k) => Math.round(v + (RAMP[i + 1][k] - v) * f));
  return `rgb(${c[0]}, ${c[1]}, ${c[2]})`;
}

/** The colour of a gradient's edges and borders: the ramp's for "ok" norms, else its class's. */
export function gradColor(s: Stats | null | undefined): string {
  const c = gradClass(s);
  if (c === "ok") return rampColor(rampT(s!.norm!));
  return GRAD_CLASSES[c].colour;
}

/** Edge width in px: 1.5 (tiny) .. 7 (large). */
export function gradWidth(s: Stats | null | undefined): number {
  const c = gradClass(s);
  if (c === "none" || c === "zero") return 1.5;
  if (c === "nonfinite" || c === "exploding") return 7;
  return 1.5 + 5.5 * rampT(s!.norm!);
}

export function fmt(v: number | null | undefined, digits = 4): string {
  if (v === null || v === undefined) return "NaN/Inf";
  if (v === 0) return "0";
  const a = Math.abs(v);
  if (a >= 1e4 || a < 1e-3) return v.toExponential(digits - 1);
  return String(Number(v.toPrecision(digits)));
}

export function gradText(s: Stats | null | undefined): string {
  const c = gradClass(s);
  if (c === "none") return "not computed yet";
  if (c === "nonfinite") return `${GRAD_CLASSES.nonfinite.word} (${s!.nan ?? 0} NaN, ${s!.inf ?? 0} Inf)`;
  return `‖grad‖ = ${fmt(s!.norm)}`;
}

/** A backward that raised at a node (not a gradient class: the node has no gradient to classify). */
export const ERROR_COLOUR = "#be123c";

/** The sRGB channels of "rgb(r, g, b)" or "#rrggbb". */
export function parseColour(c: string): [number, number, number] {
  if (c.startsWith("#")) return [1, 3, 5].map((i) => parseInt(c.slice(i, i + 2), 16)) as [number, number, number];
  const m = c.match(/[\d.]+/g) ?? ["0", "0", "0"];
  return [Number(m[0]), Number(m[1]), Number(m[2])];
}

/** WCAG relative luminance of an sRGB colour. */
export function luminance(c: string): number {
  const lin = (v: number) => { const x = v / 255; return x <= 0.03928 ? x / 12.92 : ((x + 0.055) / 1.055) ** 2.4; };
  const [r, g, b] = parseColour(c);
  return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b);
}

/** The text colour (white or black) that reads best on `background`: the ramp runs from dark purple to
 * yellow, so no single text colour is readable on every badge. */
export function textOn(background: string): string {
  const l = luminance(background);
  const dark = 0; // black: with white, one of the two always reaches a contrast of 4.5
  return (1.05) / (l + 0.05) >= (l + 0.05) / (dark + 0.05) ? "#ffffff" : "#000";
}
