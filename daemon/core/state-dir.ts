// The daemon's folders on disk, as settings: the state dir (created, writable, its real path, and
// short enough for the Unix socket Chromium makes under its TMPDIR there) and Chromium's downloads
// folder (never inside the state dir).
import { accessSync, chmodSync, chownSync, constants, existsSync, mkdirSync, realpathSync, statSync } from 'node:fs';
import path from 'node:path';
import { ConfigError } from './config-error.js';
import type { SwitchTo } from './users.js';

/** Chromium's TMPDIR inside the agent dir; short, as its socket path must fit (below). */
const CHROMIUM_TMP = 'tmp';
/**
 * Chromium makes `$TMPDIR/org.chromium.Chromium.XXXXXX/SingletonSocket` and aborts at start ("Socket
 * path too long") when that path does not fit `sun_path` (107 bytes and the NUL): so the state dir's
 * real path may have at most 107 − 45 − 4 = 58 bytes.
 */
export const MAX_STATE_DIR_BYTES = 107 - '/org.chromium.Chromium.XXXXXX/SingletonSocket'.length - `/${CHROMIUM_TMP}`.length;

/** `dir` created (0700) when missing, writable, by its real path; else ConfigError naming `setting`. */
export function writableRealDir(dir: string, setting: string): string {
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    accessSync(dir, constants.W_OK | constants.X_OK);
    return realpathSync(dir);
  } catch (err) {
    throw new ConfigError(setting, `cannot use ${dir} as a writable folder: ${(err as Error).message}`);
  }
}

export function chromiumTmpDir(agentDir: string): string {
  return path.join(agentDir, CHROMIUM_TMP);
}

/**
 * `dir` created (0700) when missing, then owned by `owner` (null: left to whoever made it), and
 * given `mode` when one is named. Throws the fs error (EPERM: the daemon may not chown: CAP_CHOWN).
 */
export function ownedDir(dir: string, owner: SwitchTo | null, mode: number | null = null): void {
  mkdirSync(dir, { recursive: true, mode: mode ?? 0o700 });
  const st = statSync(dir);
  if (!st.isDirectory()) throw Object.assign(new Error(`${dir} is not a directory`), { code: 'ENOTDIR' });
  if (owner !== null && (st.uid !== owner.uid || st.gid !== owner.gid)) chownSync(dir, owner.uid, owner.gid);
  if (mode !== null && (st.mode & 0o7777) !== mode) chmodSync(dir, mode);
}

const inside = (p: string, dir: string): boolean => p === dir || p.startsWith(`${dir}/`);

/**
 * The agent's folder (BROWSERD_AGENT_DIR): created, the daemon's, 0711 (the agent user passes
 * through to what is its own inside: Chromium's profile and TMPDIR, made the agent's at every
 * launch; the extension trees stay the daemon's, readable), by its real path; neither inside the
 * state dir nor holding it, and short enough for Chromium's socket under its TMPDIR.
 */
export function prepareAgentDir(dir: string, stateDir: string): string {
  const setting = 'BROWSERD_AGENT_DIR';
  if (inside(dir, stateDir) || inside(stateDir, dir)) throw new ConfigError(setting, `${dir} and the state dir ${stateDir} must not hold one another: the state dir is the daemon's alone`);
  let real: string;
  try {
    ownedDir(dir, { uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0 }, 0o711);
    real = realpathSync(dir);
  } catch (err) {
    throw new ConfigError(setting, `cannot make ${dir} the agent's folder (the daemon's, 0711): ${(err as Error).message}`);
  }
  if (inside(real, stateDir) || inside(stateDir, real)) throw new ConfigError(setting, `${dir} resolves to ${real}, which holds or is inside the state dir ${stateDir}`);
  const bytes = Buffer.byteLength(real);
  if (bytes > MAX_STATE_DIR_BYTES) {
    throw new ConfigError(setting, `${real} is ${bytes} bytes long; at most ${MAX_STATE_DIR_BYTES}, so that the socket Chromium makes under ${chromiumTmpDir(real)} fits a Unix socket path (107 bytes)`);
  }
  return real;
}

/**
 * Created (0700) when missing, writable, and resolved to its real path: Chromium derives an
 * unpacked extension's id from the real path, so a state dir behind a symlink must not differ.
 */
export function prepareStateDir(dir: string): string {
  const real = writableRealDir(dir, 'BROWSERD_STATE_DIR');
  // The daemon's side: its own uid, 0700 (a looser mode left by an older version is tightened).
  const st = statSync(real);
  const me = process.getuid?.() ?? st.uid;
  if (st.uid !== me) throw new ConfigError('BROWSERD_STATE_DIR', `${real} belongs to uid ${st.uid}, not to the daemon's uid ${me}`);
  if ((st.mode & 0o077) !== 0) chmodSync(real, st.mode & 0o700);
  return real;
}

/**
 * Chromium's downloads folder, never the state dir or inside it (the files API refuses every path
 * there, so downloads would be unreachable): checked here by its path and, when it exists, by its
 * real path. The files module creates it (0700) at start and checks its real path again.
 */
export function checkDownloadsDir(dir: string, stateDir: string): string {
  if (inside(dir, stateDir)) throw new ConfigError('BROWSERD_DOWNLOADS_DIR', `${dir} is inside the state dir ${stateDir}, which the files API never reaches`);
  // The real path of the deepest part that exists, with the rest: a symlink on the way counts.
  let existing = dir;
  while (!existsSync(existing) && path.dirname(existing) !== existing) existing = path.dirname(existing);
  const real = path.join(realpathSync(existing), path.relative(existing, dir));
  if (inside(real, stateDir)) throw new ConfigError('BROWSERD_DOWNLOADS_DIR', `${dir} resolves to ${real}, inside the state dir ${stateDir}`);
  return real;
}

