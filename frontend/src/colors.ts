// Gradient norm -> class, colour and width. The legend is drawn from the same table.
import type { Stats } from "./generated/events";

export const VANISHING = 1e-7;
export const EXPLODING = 1e3;

export type GradClass = "none" | "zero" | "vanishing" | "ok" | "exploding" | "nonfinite";

export function gradClass(s: Stats | null | undefined): GradClass {
  if (!s) return "none";
  if ((s.nan ?? 0) > 0 || (s.inf ?? 0) > 0 || s.norm === null || !Number.isFinite(s.norm)) return "nonfinite";
  if (s.norm === 0) return "zero";
  if (s.norm < VANISHING) return "vanishing";
  if (s.norm > EXPLODING) return "exploding";
  return "ok";
}

// A sequential, colour-blind-safe ramp (viridis stops) over log10(norm) from -7 to 3.
const STOPS: [number, number, number][] = [
  [68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37],
];
export const LOG_MIN = -7;
export const LOG_MAX = 3;

/** Position of a norm on the ramp, 0..1. */
export function rampT(norm: number): number {
  const l = Math.log10(Math.max(norm, 1e-30));
  return Math.min(1, Math.max(0, (l - LOG_MIN) / (LOG_MAX - LOG_MIN)));
}

export function rampColor(t: number): string {
  const x = Math.min(1, Math.max(0, t)) * (STOPS.length - 1);
  const i = Math.min(STOPS.length - 2, Math.floor(x));
  const f = x - i;
  const c = STOPS[i].map((v, k) => Math.round(v + (STOPS[i + 1][k] - v) * f));
  return `rgb(${c[0]}, ${c[1]}, ${c[2]})`;
}

export const CLASS_COLOR: Record<GradClass, string> = {
  none: "#b8bcc4", // not computed yet: grey, dashed
  zero: "#ffffff", // exactly zero: white, solid
  vanishing: "#7b3294", // flagged
  ok: "", // from the ramp
  exploding: "#d7301f",
  nonfinite: "#000000",
};

export function gradColor(s: Stats | null | undefined): string {
  const c = gradClass(s);
  if (c === "ok") return rampColor(rampT(s!.norm!));
  return CLASS_COLOR[c];
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
  if (c === "none") return "grad: not computed yet";
  if (c === "nonfinite") return `grad: NaN/Inf (${s!.nan ?? 0} NaN, ${s!.inf ?? 0} Inf)`;
  return `‖grad‖ = ${fmt(s!.norm)}`;
}
