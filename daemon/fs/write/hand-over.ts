// What the files API creates belongs to the agent user (docs/security.md), as if that user had
// made it: files and folders it writes are chowned as they are made (write.ts, paths/resolve.ts);
// an unpacked archive is handed over here, everything under its temp folder while that folder is
// still the daemon's (0700: no one else can reach into it, so nothing in it can be swapped for a
// link meanwhile), and the folder itself once it is in place (handOverOne). Symbolic links are
// not followed (lchown).
import { lchown, readdir } from 'node:fs/promises';
import path from 'node:path';
import type { Guard } from '../paths/guard.js';

/** Gives everything under the folder `root` (not `root` itself) to the agent user; nothing without one. */
export async function handOverTree(guard: Guard, root: string): Promise<void> {
  const a = guard.agent;
  if (a === null) return;
  const pending = [root];
  for (let dir = pending.pop(); dir !== undefined; dir = pending.pop()) {
    if (dir !== root) await lchown(dir, a.uid, a.gid);
    for (const e of await readdir(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) pending.push(p);
      else await lchown(p, a.uid, a.gid);
    }
  }
}

/** Gives the object at `at` (not followed) to the agent user; nothing without one. */
export async function handOverOne(guard: Guard, at: string): Promise<void> {
  const a = guard.agent;
  if (a !== null) await lchown(at, a.uid, a.gid);
}
