// The installed set and its folders: under <state>/extensions (the daemon's side) the set, the
// keys and the CRX files; under <agent dir>/extensions (the agent's side: Chromium, running as the
// agent user, must read the unpacked trees; the folders are the daemon's, 0755) installed/,
// staging/ and previous/ (one filesystem: a tree moves between them by rename).
//   installed.json         the set (the truth after a crash), written atomically, and the id of
//                          the install in progress (`pending_tx`) while its files are swapped
//   installed/<name>/      the unpacked extension (its path fixes the id of an unpacked install)
//   staging/<uuid>/        one request's uploaded archives and unpacked trees
//   previous/<tx>/<name>   a replaced version kept until the install <tx> commits or is undone
//   keys/<name>.pem        the CRX signing key of a name (0600), kept so its id stays the same
//   crx/<name>/<version>-<hash>.crx the packed CRX of a policy-mode extension (a unique name per
//                          content, so a replacement never overwrites the CRX a rollback serves)
//
// An install is a transaction: begin() records its id in installed.json before any file moves,
// commit() writes the new set and clears the id in one atomic write. After a crash, open() puts
// the replaced versions of a pending transaction back; those of a committed one are dropped.
import { randomUUID } from 'node:crypto';
import { chmod, mkdir, readdir, readFile, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { lazy } from '../core/lazy.js';
import type { Logger } from '../core/log.js';
import { exists, removeStaleTemps, syncDir, writeFileAtomic } from '../core/fs-atomic.js';

const CRX_FILE_RE = /^[0-9.]{1,64}(-[0-9a-f]{16})?\.crx$/;

export const ACTIVATIONS = ['live', 'restart', 'policy'] as const;
export type Activation = (typeof ACTIVATIONS)[number];

const entrySchema = lazy(() => z.object({
  name: z.string(),
  id: z.string(),
  version: z.string(),
  activation: z.enum(ACTIVATIONS),
  installed_at: z.string(),
  service_worker: z.string().nullable(),
  /** A policy install's CRX file in crx/<name>/ (older state files: `<version>.crx`). */
  crx_file: z.string().regex(CRX_FILE_RE).optional(),
}));
export type InstalledEntry = z.infer<ReturnType<typeof entrySchema>>;

const stateSchema = lazy(() => z.object({
  version: z.literal(1),
  /** The loopback port of the update server last written into the policy file. */
  update_port: z.number().int().nullable(),
  /** true while the daemon's policy file exists because of this state dir. */
  policy_file_written: z.boolean(),
  /** The install whose files are being swapped (previous/<tx>/ holds what it replaced), else null. */
  pending_tx: z.string().regex(/^[0-9a-f-]{36}$/).nullable().default(null),
  extensions: z.array(entrySchema()),
}));

export const NAME_RE = /^[A-Za-z0-9._-]{1,64}$/;

export function isValidName(name: string): boolean {
  return NAME_RE.test(name) && name !== '.' && name !== '..';
}

export class Store {
  readonly root: string;
  readonly installedDir: string;
  readonly stagingDir: string;
  readonly previousDir: string;
  readonly keysDir: string;
  readonly crxDir: string;
  private readonly file: string;
  committed = new Map<string, InstalledEntry>();
  updatePort: number | null = null;
  policyFileWritten = false;
  /** The install in progress (between begin() and commit() or abort()), else null. */
  pendingTx: string | null = null;

  /** The agent side's folder of the trees (<agent dir>/extensions). */
  readonly treeRoot: string;

  constructor(
    stateDir: string,
    private readonly log: Logger,
    /** Where the unpacked trees go (default: beside the rest, for the unit tests). */
    agentDir: string = stateDir,
  ) {
    this.root = path.join(stateDir, 'extensions');
    this.treeRoot = path.join(agentDir, 'extensions');
    this.installedDir = path.join(this.treeRoot, 'installed');
    this.stagingDir = path.join(this.treeRoot, 'staging');
    this.previousDir = path.join(this.treeRoot, 'previous');
    this.keysDir = path.join(this.root, 'keys');
    this.crxDir = path.join(this.root, 'crx');
    this.file = path.join(this.root, 'installed.json');
  }

  installedPath(name: string): string {
    return path.join(this.installedDir, name);
  }

  /** Reads installed.json and brings the folders back in line with it (after a crash mid-install). */
  async open(): Promise<void> {
    for (const dir of [this.root, this.crxDir]) await mkdir(dir, { recursive: true, mode: 0o700 });
    // Readable (not writable) by the agent user, whose Chromium loads the trees.
    for (const dir of [this.treeRoot, this.installedDir, this.stagingDir, this.previousDir]) {
      await mkdir(dir, { recursive: true, mode: 0o755 });
      await chmod(dir, 0o755);
    }
    for (const dir of [this.root, this.keysDir]) {
      for (const name of removeStaleTemps(dir)) this.log.info({ event: 'store_temp_removed', path: path.join(dir, name) }, 'removed a temp file of an unfinished store write');
    }
    try {
      const text = await readFile(this.file, 'utf8'); // first: a start without the file builds no schema
      const parsed = stateSchema().parse(JSON.parse(text));
      this.committed = new Map(parsed.extensions.map((e) => [e.name, e]));
      this.updatePort = parsed.update_port;
      this.policyFileWritten = parsed.policy_file_written;
      this.pendingTx = parsed.pending_tx;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') {
        const aside = `${this.file}.unreadable-${Date.now()}`;
        await rename(this.file, aside).catch(() => undefined);
        this.log.error({ event: 'extensions_state_unreadable', path: aside, err }, 'installed.json could not be read; starting with no extensions');
      }
    }
    await this.recover();
  }

  private async recover(): Promise<void> {
    // The versions a pending install replaced come back; a committed install's are leftovers.
    const pending = this.pendingTx;
    for (const tx of await readdir(this.previousDir)) {
      if (tx === pending) {
        for (const name of await readdir(path.join(this.previousDir, tx))) {
          if (!this.committed.has(name)) continue;
          await rm(this.installedPath(name), { recursive: true, force: true });
          await rename(path.join(this.previousDir, tx, name), this.installedPath(name));
          this.log.warn({ event: 'extension_recovered', name, tx }, 'restored the previous version of an unfinished install');
        }
      }
      await rm(path.join(this.previousDir, tx), { recursive: true, force: true });
    }
    if (pending !== null) {
      this.pendingTx = null;
      await this.save();
    }
    // A folder that is not in the set belongs to an install that never committed.
    for (const name of await readdir(this.installedDir)) {
      if (!this.committed.has(name)) await rm(this.installedPath(name), { recursive: true, force: true });
    }
    for (const [name, entry] of this.committed) {
      if (!(await exists(path.join(this.installedPath(name), 'manifest.json')))) {
        this.committed.delete(name);
        this.log.error({ event: 'extension_missing', name, id: entry.id }, 'an installed extension lost its folder; it is dropped from the set');
      }
    }
    await rm(this.stagingDir, { recursive: true, force: true });
    await mkdir(this.stagingDir, { recursive: true, mode: 0o755 });
  }

  async save(): Promise<void> {
    const state: z.infer<ReturnType<typeof stateSchema>> = {
      version: 1,
      update_port: this.updatePort,
      policy_file_written: this.policyFileWritten,
      pending_tx: this.pendingTx,
      extensions: [...this.committed.values()],
    };
    await writeFileAtomic(this.file, `${JSON.stringify(state, null, 2)}\n`, 0o600);
  }

  newStagingDir(): string {
    return path.join(this.stagingDir, randomUUID());
  }

  /** Starts an install: its id is in installed.json before any installed/ folder moves. */
  async begin(): Promise<string> {
    if (this.pendingTx !== null) throw new Error(`install ${this.pendingTx} is still in progress`);
    const tx = randomUUID();
    this.pendingTx = tx;
    await this.save();
    return tx;
  }

  /** The new set and the end of the install, in one atomic write; then the replaced versions go. */
  async commit(tx: string, entries: InstalledEntry[]): Promise<void> {
    if (this.pendingTx !== tx) throw new Error(`install ${tx} is not the one in progress`);
    for (const e of entries) this.committed.set(e.name, e);
    this.pendingTx = null;
    await this.save();
    await this.dropTx(tx);
  }

  /** Ends an install that was undone (its files already restored). */
  async abort(tx: string): Promise<void> {
    if (this.pendingTx !== tx) return;
    this.pendingTx = null;
    await this.save();
    await this.dropTx(tx);
  }

  /** Moves installed/<name> aside into previous/<tx>/ (when there is one); returns where it went. */
  async putAside(tx: string, name: string): Promise<string | null> {
    const from = this.installedPath(name);
    if (!(await exists(from))) return null;
    const txDir = path.join(this.previousDir, tx);
    await mkdir(txDir, { recursive: true, mode: 0o700 });
    const to = path.join(txDir, name);
    await rename(from, to);
    return to;
  }

  /** Renames an unpacked, checked tree into installed/<name>. */
  async place(name: string, tree: string): Promise<void> {
    await rename(tree, this.installedPath(name));
    await syncDir(this.installedDir);
  }

  /** Undoes place(): the new tree goes, the one put aside (if any) comes back. */
  async restore(name: string, aside: string | null): Promise<void> {
    await rm(this.installedPath(name), { recursive: true, force: true });
    if (aside !== null && (await exists(aside))) await rename(aside, this.installedPath(name));
    await syncDir(this.installedDir);
  }

  private async dropTx(tx: string): Promise<void> {
    await rm(path.join(this.previousDir, tx), { recursive: true, force: true });
  }

  async removeInstalled(name: string): Promise<void> {
    await rm(this.installedPath(name), { recursive: true, force: true });
    await rm(path.join(this.crxDir, name), { recursive: true, force: true });
  }
}
