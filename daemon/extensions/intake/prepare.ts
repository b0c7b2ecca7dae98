// From uploaded archives to checked, unpacked trees in the staging folder, before anything
// touches Chromium: safe unzip, the extension's root (the archive's root or its single top
// folder), manifest checks. Every item is checked; all rejections come back in one 422.
import { mkdir, readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from '../../core/log.js';
import { PayloadTooLargeError } from '../../core/errors.js';
import { readManifest, type ManifestFacts } from './manifest.js';
import { ArchiveError, safeUnzip, type UnzipLimits } from '../../core/zip/unzip.js';
import { Rejection, rejectedError, type ItemRejection } from './rejection.js';
import type { UploadItem } from './upload.js';

export interface PreparedItem {
  label: string;
  name: string;
  /** The unpacked extension (manifest.json inside), in the staging folder. */
  tree: string;
  facts: ManifestFacts;
}

/** Folders archivers add that are not part of the extension. */
const IGNORED_TOP = new Set(['__MACOSX']);

/** The folder holding manifest.json: the unpack folder itself, or its single top folder. */
export async function extensionRoot(dir: string): Promise<string> {
  const names = (await readdir(dir)).filter((n) => !IGNORED_TOP.has(n));
  if (names.includes('manifest.json')) return dir;
  if (names.length === 1) {
    const only = path.join(dir, names[0] as string);
    if ((await stat(only)).isDirectory() && (await readdir(only)).includes('manifest.json')) return only;
  }
  throw new Rejection('manifest_missing', 'manifest.json is missing: it must be at the archive\'s root or in its single top folder');
}

interface PrepareOptions extends UnzipLimits {
  allowManifestV2: boolean;
}

export async function prepareItems(items: UploadItem[], stagingDir: string, opts: PrepareOptions, log: Logger): Promise<PreparedItem[]> {
  const prepared: PreparedItem[] = [];
  const rejected: ItemRejection[] = [];
  for (const [k, item] of items.entries()) {
    const dest = path.join(stagingDir, `tree-${k}`);
    await mkdir(dest, { mode: 0o755 });
    try {
      await safeUnzip(item.zipFile, dest, { ...opts, unpackedWhat: 'the unpacked extension', unpackedSetting: 'BROWSERD_EXTENSION_MAX_UNPACKED_BYTES' }).catch((err: unknown) => {
        throw err instanceof ArchiveError ? new Rejection(err.causeCode, err.message) : err;
      });
      const tree = await extensionRoot(dest);
      const facts = await readManifest(tree, { allowV2: opts.allowManifestV2 });
      prepared.push({ label: item.label, name: item.name, tree, facts });
    } catch (err) {
      if (err instanceof PayloadTooLargeError) {
        log.warn({ event: 'extension_rejected', name: item.name, cause: 'unpacked_too_large', reason: err.message }, 'extension rejected');
      }
      if (!(err instanceof Rejection)) throw err;
      log.warn({ event: 'extension_rejected', name: item.name, cause: err.causeCode, reason: err.message }, 'extension rejected');
      rejected.push({ label: item.label, name: item.name, rejection: err });
    }
  }
  if (rejected.length > 0) throw rejectedError(rejected);
  return prepared;
}
