// The agent user (BROWSERD_AGENT_USER's default `browser`, made by .ci/setup): every process the
// API starts, Chromium and the Playwright runner run as it. A folder such a process writes to
// must be that user's: agentTempDir() is a temp folder it owns.
import { chownSync, mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { tempDir } from './cleanup.js';

export const AGENT_USER = 'browser';

/** The agent user's uid, gid and home, from /etc/passwd (throws when .ci/setup has not made it). */
export function agentIds(): { uid: number; gid: number; home: string } {
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((l) => l.startsWith(`${AGENT_USER}:`));
  if (line === undefined) throw new Error(`no user ${AGENT_USER}: run .ci/setup --test`);
  const f = line.split(':');
  return { uid: Number(f[2]), gid: Number(f[3]), home: f[5] as string };
}

/** A temp folder (removed with the others) owned by the agent user, so the API's processes may write there. */
export function agentTempDir(prefix?: string): string {
  const dir = tempDir(prefix);
  const { uid, gid } = agentIds();
  chownSync(dir, uid, gid);
  return dir;
}

/** As scratchDirs(): each call a new empty folder (`case-0`, …) in one temp root; the agent user owns both. */
export function agentScratchDirs(prefix: string): () => string {
  const root = agentTempDir(prefix);
  const { uid, gid } = agentIds();
  let n = 0;
  return () => {
    const dir = path.join(root, `case-${n++}`);
    mkdirSync(dir);
    chownSync(dir, uid, gid);
    return dir;
  };
}

/** Makes `file` (made by the test, as root) the agent user's, as if that user had written it. */
export function giveToAgent(file: string): void {
  const { uid, gid } = agentIds();
  chownSync(file, uid, gid);
}
