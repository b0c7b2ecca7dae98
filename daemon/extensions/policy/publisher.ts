// Policy-mode publishing: the CRX of each policy extension (signed with the key kept for its
// name), the loopback update server that serves it, and the daemon's forcelist file in the
// policy directory. `sync(set)` makes the file and the server match a set of extensions.
// Every pack gets its own file (version and content hash in the name): a replacement with the
// same version never overwrites the CRX a rollback goes back to; prune() drops unused ones.
import { randomUUID } from 'node:crypto';
import { mkdir, readdir, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from '../../core/log.js';
import { loadOrCreateKey, packCrx3, publicKeyDer, idFromPublicKey } from './crx3.js';
import { syncDir } from '../../core/fs-atomic.js';
import { writeForcelist } from './policy.js';
import type { InstalledEntry, Store } from '../store.js';
import { UpdateServer } from './update-server.js';
import { zipDirectory } from '../../core/zip/write.js';

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
      return e ? { id: e.id, version: e.version, fileName: crxFileName(e), crxFile: this.crxFile(e) } : null;
    }, log);
  }

  /** The CRX of a policy entry. */
  crxFile(e: InstalledEntry): string {
    return path.join(this.store.crxDir, e.name, crxFileName(e));
  }

  /** The id a policy install of `name` gets: from the key kept for the name (created on first use). */
  async idFor(name: string): Promise<string> {
    return idFromPublicKey(publicKeyDer(await loadOrCreateKey(this.store.keysDir, name)));
  }

  /**
   * Packs installed/<name> into a new crx/<name>/<version>-<hash>.crx (the zip and the CRX are
   * written as files, never whole in memory); returns the id and the CRX's file name.
   */
  async pack(name: string, version: string): Promise<{ id: string; crxFile: string }> {
    const key = await loadOrCreateKey(this.store.keysDir, name);
    const dir = path.join(this.store.crxDir, name);
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const tmp = randomUUID();
    const zipTmp = path.join(dir, `.${tmp}.zip.tmp`);
    const crxTmp = path.join(dir, `.${tmp}.crx.tmp`);
    try {
      await zipDirectory(this.store.installedPath(name), zipTmp);
      const { id, sha256 } = await packCrx3(zipTmp, key, crxTmp);
      const crxFile = `${version}-${sha256.slice(0, 16)}.crx`;
      await rename(crxTmp, path.join(dir, crxFile));
      await syncDir(dir);
      return { id, crxFile };
    } finally {
      await rm(zipTmp, { force: true });
      await rm(crxTmp, { force: true });
    }
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

  /** Drops CRX files (and leftovers of an interrupted pack) that no entry of `set` uses. */
  async prune(set: Iterable<InstalledEntry>): Promise<void> {
    const keep = new Set([...set].filter((e) => e.activation === 'policy').map((e) => this.crxFile(e)));
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

/** The CRX file name of a policy entry (state files before content-named CRX files: `<version>.crx`). */
function crxFileName(e: InstalledEntry): string {
  return e.crx_file ?? `${e.version}.crx`;
}
