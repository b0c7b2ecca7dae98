// A V8 heap snapshot (.heapsnapshot, the JSON the inspector and --heapsnapshot-signal write) reduced to
// what the soak compares: live objects counted by constructor (node type + name), with their self
// sizes, and the difference of two such counts (the top growers between a snapshot after warm-up and
// one at the end).
import { readFileSync } from 'node:fs';

export interface Group {
  count: number;
  bytes: number;
}

interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]] } };
  nodes: number[];
  strings: string[];
}

/** Objects by `type:name` (e.g. `object:Socket`, `closure:onread`, `string`), self sizes summed. */
export function groupsOf(file: string): Map<string, Group> {
  const snap = JSON.parse(readFileSync(file, 'utf8')) as Snapshot;
  const fields = snap.snapshot.meta.node_fields;
  const types = snap.snapshot.meta.node_types[0];
  const width = fields.length;
  const typeAt = fields.indexOf('type');
  const nameAt = fields.indexOf('name');
  const sizeAt = fields.indexOf('self_size');
  const out = new Map<string, Group>();
  for (let i = 0; i < snap.nodes.length; i += width) {
    const type = types[snap.nodes[i + typeAt] as number] ?? '?';
    // Strings and numbers are named by their content: one group each, not one per value.
    const named = type === 'object' || type === 'closure' || type === 'native' || type === 'hidden' || type === 'object shape';
    const key = named ? `${type}:${(snap.strings[snap.nodes[i + nameAt] as number] ?? '?').slice(0, 60)}` : type;
    const g = out.get(key) ?? { count: 0, bytes: 0 };
    g.count++;
    g.bytes += snap.nodes[i + sizeAt] as number;
    out.set(key, g);
  }
  return out;
}

export interface Growth {
  key: string;
  before: Group;
  after: Group;
}

/** The groups that grew most in bytes (then count) from `before` to `after`, top `n`. */
export function growers(before: Map<string, Group>, after: Map<string, Group>, n: number): Growth[] {
  const zero = { count: 0, bytes: 0 };
  return [...after.entries()]
    .map(([key, a]) => ({ key, before: before.get(key) ?? zero, after: a }))
    .filter((g) => g.after.bytes > g.before.bytes || g.after.count > g.before.count)
    .sort((x, y) => y.after.bytes - y.before.bytes - (x.after.bytes - x.before.bytes) || y.after.count - y.before.count - (x.after.count - x.before.count))
    .slice(0, n);
}

/** Totals of a snapshot: objects and bytes. */
export function totalOf(groups: Map<string, Group>): Group {
  let count = 0;
  let bytes = 0;
  for (const g of groups.values()) {
    count += g.count;
    bytes += g.bytes;
  }
  return { count, bytes };
}
