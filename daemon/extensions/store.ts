// The installed set and its folders under <state>/extensions:
//   installed.json         the set (the truth after a crash), written atomically
//   installed/<name>/      the unpacked extension (its path fixes the id of an unpacked install)
//   staging/<uuid>/        one request's uploaded archives and unpacked trees
//   previous/<uuid>/<name> a replaced version kept until the new one is active
//   keys/<name>.pem        the CRX signing key of a name (0600), kept so its id stays the same
//   crx/<name>/<version>.crx the packed CRX of a policy-mode extension
import { randomUUID } from 'node:crypto';
import { mkdir, readdir, readFile, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import type { Logger } from '../core/log.js';
import { exists, syncDir, writeFileAtomic } from '../core/fs-atomic.js';

export const ACTIVATIONS = ['live', 'restart', 'policy'] as const;
export type Activation = (typeof ACTIVATIONS)[number];

const entrySchema = z.object({
  name: z.string(),
  id: z.string(),
  version: z.string(),
  activation: z.enum(ACTIVATIONS),
  installed_at: z.string(),
  service_worker: z.string().nullable(),
});
export type InstalledEntry = z.infer<typeof entrySchema>;

const stateSchema = z.object({
  version: z.literal(1),
  /** The loopback port of the update server last written into the policy file. */
  update_port: z.number().int().nullable(),
  /** true while the daemon's policy file exists because of this state dir. */
  policy_file_written: z.boolean(),
  extensions: z.array(entrySchema),
});

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

  constructor(
    stateDir: string,
    private readonly log: Logger,
  ) {
    this.root = path.join(stateDir, 'extensions');
    this.installedDir = path.join(this.root, 'installed');
    this.stagingDir = path.join(this.root, 'staging');
    this.previousDir = path.join(this.root, 'previous');
    this.keysDir = path.join(this.root, 'keys');
    this.crxDir = path.join(this.root, 'crx');
    this.file = path.join(this.root, 'installed.json');
  }

  installedPath(name: string): string {
    return path.join(this.installedDir, name);
  }

  /** Reads installed.json and brings the folders back in line with it (after a crash mid-install). */
  async open(): Promise<void> {
    for (const dir of [this.root, this.installedDir, this.stagingDir, this.previousDir, this.crxDir]) {
      await mkdir(dir, { recursive: true, mode: 0o700 });
    }
    try {
      const parsed = stateSchema.parse(JSON.parse(await readFile(this.file, 'utf8')));
      this.committed = new Map(parsed.extensions.map((e) => [e.name, e]));
      this.updatePort = parsed.update_port;
      this.policyFileWritten = parsed.policy_file_written;
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
    // A replaced version whose replacement never committed comes back.
    for (const tx of await readdir(this.previousDir)) {
      for (const name of await readdir(path.join(this.previousDir, tx))) {
        if (this.committed.has(name)) {
          await rm(this.installedPath(name), { recursive: true, force: true });
          await rename(path.join(this.previousDir, tx, name), this.installedPath(name));
          this.log.warn({ event: 'extension_recovered', name }, 'restored the previous version of an unfinished install');
        }
      }
      await rm(path.join(this.previousDir, tx), { recursive: true, force: true });
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
    await mkdir(this.stagingDir, { recursive: true, mode: 0o700 });
  }

  async save(): Promise<void> {
    const state: z.infer<typeof stateSchema> = {
      version: 1,
      update_port: this.updatePort,
      policy_file_written: this.policyFileWritten,
      extensions: [...this.committed.values()],
    };
    await writeFileAtomic(this.file, `${JSON.stringify(state, null, 2)}\n`, 0o600);
  }

  newStagingDir(): string {
    return path.join(this.stagingDir, randomUUID());
  }

  /** Moves installed/<name> aside (when there is one); returns where it went. */
  async putAside(name: string): Promise<string | null> {
    const from = this.installedPath(name);
    if (!(await exists(from))) return null;
    const txDir = path.join(this.previousDir, randomUUID());
    await mkdir(txDir, { mode: 0o700 });
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
    if (aside !== null) {
      await rename(aside, this.installedPath(name));
      await rm(path.dirname(aside), { recursive: true, force: true });
    }
  }

  async dropAside(aside: string | null): Promise<void> {
    if (aside !== null) await rm(path.dirname(aside), { recursive: true, force: true });
  }

  async removeInstalled(name: string): Promise<void> {
    await rm(this.installedPath(name), { recursive: true, force: true });
    await rm(path.join(this.crxDir, name), { recursive: true, force: true });
  }
}
