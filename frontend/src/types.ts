// Event shapes (schema v1, rtxviz/schema.py). Only the fields the viewer reads are typed.

/** Summary of one tensor; NaN/Inf never appear as numbers (see the counts); null in `values` stands for them. */
export interface Stats {
  shape: number[];
  norm: number | null;
  min: number | null;
  max: number | null;
  /** only for tensors of at most 1024 elements (older runs: always) */
  mean?: number | null;
  nan?: number;
  inf?: number;
  values?: (number | null)[] | null;
}

export interface Ref {
  node?: number;
  leaf?: number;
}

/** One event as the server stores and streams it (`seq` added by the server). */
export interface Ev {
  seq?: number;
  v: number;
  kind: string;
  t: number;
  step?: number | null;
  [field: string]: unknown;
}

export interface RunInfo {
  id: string;
  name: string;
  created?: number;
  updated?: number;
  status?: string;
  n_events?: number;
  dropped?: number;
  last_step?: number | null;
}
