// Managed policy: whether the policy directory forbids unpacked extensions, and the daemon's own
// policy file there, which holds only ExtensionInstallForcelist for the daemon's policy-mode
// extensions. Other files in the directory are read, never written.
import { mkdir, readdir, readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { syncDir, writeFileAtomic } from '../../core/fs-atomic.js';

export const POLICY_FILE = 'browserd-extensions.json';

type PolicyJson = Record<string, unknown>;

async function readPolicies(dir: string): Promise<{ file: string; json: PolicyJson }[]> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return [];
  }
  const out: { file: string; json: PolicyJson }[] = [];
  for (const name of names.sort()) {
    if (!name.endsWith('.json') || name === POLICY_FILE || name.startsWith('.')) continue;
    try {
      const json = JSON.parse(await readFile(path.join(dir, name), 'utf8')) as unknown;
      if (typeof json === 'object' && json !== null && !Array.isArray(json)) out.push({ file: name, json: json as PolicyJson });
    } catch {
      // Chromium ignores a file it cannot parse; so do we.
    }
  }
  return out;
}

/**
 * Why managed policy forbids unpacked extensions (`Extensions.loadUnpacked`, --load-extension),
 * or null when it allows them: ExtensionInstallBlocklist holding "*", ExtensionSettings "*" with
 * installation_mode "blocked", or ExtensionAllowedTypes without "extension".
 */
export async function unpackedBlockedReason(dir: string): Promise<string | null> {
  for (const { file, json } of await readPolicies(dir)) {
    const block = json.ExtensionInstallBlocklist;
    if (Array.isArray(block) && block.includes('*')) return `${file}: ExtensionInstallBlocklist holds "*"`;
    const settings = json.ExtensionSettings;
    if (typeof settings === 'object' && settings !== null) {
      const star = (settings as Record<string, unknown>)['*'];
      if (typeof star === 'object' && star !== null && (star as Record<string, unknown>).installation_mode === 'blocked') {
        return `${file}: ExtensionSettings "*" has installation_mode "blocked"`;
      }
    }
    const types = json.ExtensionAllowedTypes;
    if (Array.isArray(types) && !types.includes('extension')) return `${file}: ExtensionAllowedTypes does not allow "extension"`;
  }
  return null;
}

/** Writes the forcelist (atomically), or removes the file when the list is empty. */
export async function writeForcelist(dir: string, entries: string[]): Promise<void> {
  const file = path.join(dir, POLICY_FILE);
  if (entries.length === 0) {
    await rm(file, { force: true });
    await syncDir(dir);
    return;
  }
  await mkdir(dir, { recursive: true, mode: 0o755 });
  await writeFileAtomic(file, `${JSON.stringify({ ExtensionInstallForcelist: entries }, null, 2)}\n`, 0o644);
}

