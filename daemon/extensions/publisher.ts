// Policy-mode publishing: the CRX of each policy extension (signed with the key kept for its
// name), the loopback update server that serves it, and the daemon's forcelist file in the
// policy directory. `sync(set)` makes the file and the server match a set of extensions.
import { mkdir, readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from '../core/log.js';
import { loadOrCreateKey, packCrx3, publicKeyDer, idFromPublicKey } from './crx3.js';
import { writeFileAtomic } from '../core/fs-atomic.js';
import { writeForcelist } from './policy.js';
import type { InstalledEntry, Store } from './store.js';
import { UpdateServer } from './update-server.js';
import { zipDirectory } from './zip-write.js';

export class PolicyPublisher {
  private readonly server: UpdateServer;
  private served: InstalledEntry[] = [];

  constructor(
    private readonly store: Store,
    private readonly policyDir: string,
    private readonly log: Logger,
  ) {
    this.server = new UpdateServer((id) => {
      const e = this.served.find((x) => x.id === id);
      return e ? { id: e.id, version: e.version, crxFile: this.crxFile(e.name, e.version) } : null;
    }, log);
  }

  crxFile(name: string, version: string): string {
    return path.join(this.store.crxDir, name, `${version}.crx`);
  }

  /** The id a policy install of `name` gets: from the key kept for the name (created on first use). */
  async idFor(name: string): Promise<string> {
    return idFromPublicKey(publicKeyDer(await loadOrCreateKey(this.store.keysDir, name)));
  }

  /** Packs installed/<name> into crx/<name>/<version>.crx; returns the id. */
  async pack(name: string, version: string): Promise<string> {
    const key = await loadOrCreateKey(this.store.keysDir, name);
    const { crx, id } = packCrx3(await zipDirectory(this.store.installedPath(name)), key);
    await mkdir(path.join(this.store.crxDir, name), { recursive: true, mode: 0o700 });
    await writeFileAtomic(this.crxFile(name, version), crx, 0o600);
    return id;
  }

  /** The forcelist file and the update server for the policy entries of `set`. */
  async sync(set: Iterable<InstalledEntry>): Promise<void> {
    const policy = [...set].filter((e) => e.activation === 'policy');
    this.served = policy;
    if (policy.length > 0) {
      const port = await this.server.ensure(this.store.updatePort);
      if (!this.store.policyFileWritten || this.store.updatePort !== port) {
        // Recorded before the file exists, so a crash cannot leave a file this state dir forgot.
        this.store.policyFileWritten = true;
        this.store.updatePort = port;
        await this.store.save();
      }
      await writeForcelist(this.policyDir, policy.map((e) => `${e.id};${this.server.updateUrl(e.id)}`));
      this.log.info({ event: 'extension_policy_written', ids: policy.map((e) => e.id), dir: this.policyDir }, 'forcelist policy written');
    } else if (this.store.policyFileWritten) {
      await writeForcelist(this.policyDir, []);
      this.store.policyFileWritten = false;
      await this.store.save();
      await this.server.close();
      this.log.info({ event: 'extension_policy_removed', dir: this.policyDir }, 'no policy extension left: forcelist policy removed');
    }
  }

  /** Drops CRX files of versions no entry of `set` uses. */
  async prune(set: Iterable<InstalledEntry>): Promise<void> {
    const keep = new Set([...set].filter((e) => e.activation === 'policy').map((e) => this.crxFile(e.name, e.version)));
    for (const name of await readdir(this.store.crxDir).catch(() => [] as string[])) {
      const dir = path.join(this.store.crxDir, name);
      for (const f of await readdir(dir).catch(() => [] as string[])) {
        if (!keep.has(path.join(dir, f))) await rm(path.join(dir, f), { force: true });
      }
      if ((await readdir(dir).catch(() => [])).length === 0) await rm(dir, { recursive: true, force: true });
    }
  }

  close(): Promise<void> {
    return this.server.close();
  }
}
