// The daemon's folders on disk, as settings: the state dir (created, writable, its real path, and
// short enough for the Unix socket Chromium makes under its TMPDIR there) and Chromium's downloads
// folder (never inside the state dir).
import { accessSync, constants, existsSync, mkdirSync, realpathSync } from 'node:fs';
import path from 'node:path';
import { ConfigError } from './config-error.js';

/** Chromium's TMPDIR inside the state dir; short, as its socket path must fit (below). */
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

export function chromiumTmpDir(stateDir: string): string {
  return path.join(stateDir, CHROMIUM_TMP);
}

/**
 * Created (0700) when missing, writable, and resolved to its real path: Chromium derives an
 * unpacked extension's id from the real path, so a state dir behind a symlink must not differ.
 */
export function prepareStateDir(dir: string): string {
  const real = writableRealDir(dir, 'BROWSERD_STATE_DIR');
  const bytes = Buffer.byteLength(real);
  if (bytes > MAX_STATE_DIR_BYTES) {
    throw new ConfigError('BROWSERD_STATE_DIR', `${real} is ${bytes} bytes long; at most ${MAX_STATE_DIR_BYTES}, so that the socket Chromium makes under ${chromiumTmpDir(real)} fits a Unix socket path (107 bytes)`);
  }
  return real;
}

/**
 * Chromium's downloads folder, never the state dir or inside it (the files API refuses every path
 * there, so downloads would be unreachable): checked here by its path and, when it exists, by its
 * real path. The files module creates it (0700) at start and checks its real path again.
 */
export function checkDownloadsDir(dir: string, stateDir: string): string {
  const inside = (p: string): boolean => p === stateDir || p.startsWith(`${stateDir}/`);
  if (inside(dir)) throw new ConfigError('BROWSERD_DOWNLOADS_DIR', `${dir} is inside the state dir ${stateDir}, which the files API never reaches`);
  // The real path of the deepest part that exists, with the rest: a symlink on the way counts.
  let existing = dir;
  while (!existsSync(existing) && path.dirname(existing) !== existing) existing = path.dirname(existing);
  const real = path.join(realpathSync(existing), path.relative(existing, dir));
  if (inside(real)) throw new ConfigError('BROWSERD_DOWNLOADS_DIR', `${dir} resolves to ${real}, inside the state dir ${stateDir}`);
  return real;
}

