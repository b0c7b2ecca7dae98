// Chromium flags set through the API (PATCH /browsers/{id}/chromium/flags, configure): each checked
// for shape, then against the allowlist (flag-allowlist.ts: a reason and a value grammar for each;
// everything else is 400), merged by name.
import { flagName, flagShapeProblem } from '../../core/flags-parse.js';
import { flagRefusal } from './flag-allowlist.js';

/** At most this many flags set through the API. */
export const MAX_API_FLAGS = 64;

/** Every problem of `flags` (`<field>[i]: …`): a flag not shaped as --name[=value], or not on the allowlist with a value of its grammar. */
export function checkApiFlags(flags: readonly string[], field = 'flags'): string[] {
  const out: string[] = [];
  flags.forEach((flag, i) => {
    const shape = flagShapeProblem(flag);
    if (shape !== null) return void out.push(`${field}[${i}]: "${flag.slice(0, 100)}" ${shape}`);
    const why = flagRefusal(flag);
    if (why !== null) out.push(`${field}[${i}]: ${flagName(flag)} ${why}`);
  });
  return out;
}

/** The flags of `flags` a client may set (the allowlist of today: a stored set may predate it). */
export function allowedFlags(flags: readonly string[]): { kept: string[]; dropped: string[] } {
  const kept: string[] = [];
  const dropped: string[] = [];
  for (const f of flags) (flagShapeProblem(f) === null && flagRefusal(f) === null ? kept : dropped).push(f);
  return { kept, dropped };
}

/** The flags after a merge: a flag replaces the one of the same name; `remove` drops names. */
export function mergeFlags(cur: readonly string[], add: readonly string[], remove: readonly string[] = []): string[] {
  const drop = new Set([...remove.map(flagName), ...add.map(flagName)]);
  const kept = cur.filter((f) => !drop.has(flagName(f)));
  const seen = new Set<string>();
  const added: string[] = [];
  for (const f of [...add].reverse()) {
    if (seen.has(flagName(f))) continue; // the last of a name in one request wins
    seen.add(flagName(f));
    added.unshift(f);
  }
  return [...kept, ...added];
}
