// Finding an executable on a PATH, as execvp(3) would, for the daemon's own tools (Chromium,
// setpriv). Only absolute folders count: a relative entry would depend on the daemon's working
// directory. (A command of the processes API is looked up for the user it runs as, in
// processes/launch/command.ts.)
import { accessSync, constants } from 'node:fs';
import path from 'node:path';

/** The PATH of a daemon whose environment has none (systemd's default for system services). */
export const DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** Whether the daemon may execute `file` (access(2), X_OK). */
export function isExecutable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** The first executable `name` in the absolute folders of `pathVar`, or null. */
export function findOnPath(name: string, pathVar: string): string | null {
  for (const dir of pathVar.split(':')) {
    if (!dir.startsWith('/')) continue;
    const file = path.join(dir, name);
    if (isExecutable(file)) return file;
  }
  return null;
}
