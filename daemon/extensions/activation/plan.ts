// The plan of an install, made before anything is touched: each item's activation mode and new
// entry (its id), and the id check. Chromium knows an extension by its id alone, so an item whose
// id is another's (a manifest `key` copied from another extension) is refused: it would silently
// replace that one.
import type { Logger } from '../../core/log.js';
import { idFromPath, idFromPublicKey } from '../policy/crx3.js';
import type { PreparedItem } from '../intake/prepare.js';
import type { PolicyPublisher } from '../policy/publisher.js';
import { Rejection, rejectedError, type ItemRejection } from '../intake/rejection.js';
import type { Activation, InstalledEntry, Store } from '../store.js';

export interface Plan {
  item: PreparedItem;
  mode: Activation;
  entry: InstalledEntry;
  /** The installed version of the same name, replaced by this item; else null. */
  replaced: InstalledEntry | null;
  /** Where the replaced version's files wait (previous/<tx>/<name>) until the commit. */
  aside: string | null;
  /** installed/<name> holds the new tree (until restored). */
  placed: boolean;
}

interface PlanInputs {
  store: Store;
  publisher: PolicyPublisher;
  /** Why managed policy forbids unpacked extensions, else null. */
  blocked: string | null;
  /** Chromium is ready (live activation is possible). */
  up: boolean;
}

export function setMode(p: Plan, mode: Activation): void {
  p.mode = mode;
  p.entry.activation = mode;
}

/**
 * `policy` when managed policy forbids unpacked extensions or the manifest needs it; else `live`
 * when Chromium is ready, `restart` when not; an item leaving policy mode is `restart` (only a
 * restart applies the forcelist). A request that needs a restart activates all its items by it.
 * A policy name gets its signing key here (kept per name).
 */
export async function planItems(items: PreparedItem[], inputs: PlanInputs): Promise<Plan[]> {
  const { store, publisher, blocked, up } = inputs;
  const plans: Plan[] = [];
  for (const item of items) {
    const replaced = store.committed.get(item.name) ?? null;
    let mode: Activation = item.facts.needsPolicy || blocked !== null ? 'policy' : up ? 'live' : 'restart';
    if (mode !== 'policy' && replaced?.activation === 'policy') mode = 'restart';
    const id = mode === 'policy' ? await publisher.idFor(item.name) : unpackedId(store, item);
    const entry: InstalledEntry = {
      name: item.name,
      id,
      version: item.facts.version,
      activation: mode,
      installed_at: new Date().toISOString(),
      service_worker: item.facts.serviceWorker,
    };
    plans.push({ item, mode, entry, replaced, aside: null, placed: false });
  }
  if (plans.some((p) => p.mode !== 'live')) for (const p of plans) if (p.mode === 'live') setMode(p, 'restart');
  return plans;
}

/** Chromium's id of an unpacked extension: from the manifest's key, else from its absolute path. */
function unpackedId(store: Store, item: PreparedItem): string {
  if (item.facts.key !== null) return idFromPublicKey(Buffer.from(item.facts.key, 'base64'));
  return idFromPath(store.installedPath(item.name));
}

/** 422 extension_rejected (id_conflict) when an id is another item's, or an installed extension's of another name. */
export function checkIds(plans: Plan[], committed: ReadonlyMap<string, InstalledEntry>, log: Logger): void {
  const owners = new Map([...committed.values()].map((e) => [e.id, e.name]));
  const inRequest = new Map<string, Plan>();
  const rejected: ItemRejection[] = [];
  for (const p of plans) {
    const { id, name } = p.entry;
    const twin = inRequest.get(id);
    const owner = owners.get(id);
    let why: string | null = null;
    if (twin !== undefined) why = `its id ${id} is also the id of ${twin.item.label} (${twin.entry.name}) in this request (their manifests carry the same key)`;
    else if (owner !== undefined && owner !== name) why = `its id ${id} is the id of the installed extension ${owner} (the manifest's key is the same); Chromium would replace ${owner} with it`;
    else inRequest.set(id, p);
    if (why === null) continue;
    log.warn({ event: 'extension_rejected', name, cause: 'id_conflict', reason: why }, 'extension rejected');
    rejected.push({ label: p.item.label, name, rejection: new Rejection('id_conflict', why) });
  }
  if (rejected.length > 0) throw rejectedError(rejected);
}
