// Whose run is whose, for a teacher's page on a class server (rtxviz users add): the owners in the run list, the
// filter by student, and the label a run shows. No DOM here, so node's tests can run it.

/** What the page needs of a run to sort it by owner. */
export interface Owned {
  owner?: string | null;
}

/** Who the page's token is (GET /api/me): the admin (name null), a teacher, or a student. */
export interface Me {
  name: string | null;
  teacher: boolean;
  reads_all: boolean;
}

/** The filter's value for "every student". */
export const EVERYONE = "";

/** The distinct owners of `runs`, sorted; runs of the admin token (owner null) are not a student. */
export function owners(runs: readonly Owned[]): string[] {
  const seen = new Set<string>();
  for (const r of runs) if (r.owner) seen.add(r.owner);
  return [...seen].sort((a, b) => a.localeCompare(b));
}

/** The runs the filter shows: every run for EVERYONE, else that student's. */
export function byOwner<T extends Owned>(runs: readonly T[], owner: string): T[] {
  return owner === EVERYONE ? runs.slice() : runs.filter((r) => r.owner === owner);
}

/** Whether the page shows owners (and the filter): a token that reads every run, on a server whose runs have
 * owners. A student (or a server without accounts) sees no owner column: every run shown is their own. */
export function showsOwners(me: Me | null, runs: readonly Owned[]): boolean {
  return (me?.reads_all ?? false) && runs.some((r) => !!r.owner);
}

/** A run's owner as the list shows it: the student's name, or "teacher" for the admin token's runs. */
export function ownerLabel(run: Owned): string {
  return run.owner ?? "teacher";
}
