// download_dir_zip: a folder as a zip built while it is sent. First the tree is walked (through
// folder handles, no symlink followed; names sorted) into a plan, so that a tree over the entry
// limit is a 413 before any byte is sent; then each file is opened, checked again (what was opened
// must be the path planned, a regular file, not a protected inode) and written: small files read
// whole and deflated on zlib's thread pool, large ones streamed with a data descriptor (zip64 past
// 4 GiB). Left out: symlinks, devices, fifos, sockets, and whatever the files API refuses (the state
// directory, protected files, special file systems), and files that vanished since the walk.
import { constants, type Stats } from 'node:fs';
import { open, readdir, readlink, type FileHandle } from 'node:fs/promises';
import { BrowserdError, ConflictError } from '../../core/errors.js';
import { ZipWriter, type Prepared, type ZipSink } from '../../core/zip/write.js';
import { mapped } from '../paths/errno.js';
import { MAY_READ, MAY_SEARCH, type Guard } from '../paths/guard.js';
import { openDir, resolve, type Dir } from '../paths/resolve.js';

/** Files up to this size are read whole and deflated in one call; larger ones are streamed. */
const SMALL_FILE_BYTES = 1024 * 1024;
/** Small files read and deflated ahead of the one being sent (the thread pool works on several at once). */
const READ_AHEAD = 8;

interface PlanEntry {
  /** Path inside the archive (`a/b.txt`, folders end with `/`). */
  rel: string;
  real: string;
  kind: 'dir' | 'file';
  mode: number;
  mtime: Date;
}

export interface ZipPlan {
  /** The folder's real path and its name (for the attachment's file name). */
  real: string;
  name: string;
  entries: PlanEntry[];
}

function tooMany(input: string, max: number): BrowserdError {
  return new BrowserdError('payload_too_large', `${input} holds more than ${max} entries (BROWSERD_FS_MAX_ZIP_ENTRIES); archive a smaller folder`);
}

export async function planZip(guard: Guard, input: string, maxEntries: number): Promise<ZipPlan> {
  const t = await resolve(guard, input, { follow: true, access: 'read' });
  try {
    if (!t.stat?.isDirectory()) throw new ConflictError('not_a_directory', `${input} is not a folder`);
    const root = await mapped(input, () => openDir(t.at, t.real));
    const entries: PlanEntry[] = [];
    try {
      await mapped(input, () => walkInto(guard, root, '', entries, maxEntries, input));
    } finally {
      await root.close();
    }
    return { real: t.real, name: t.name === '' ? 'root' : t.name, entries };
  } finally {
    await t.release();
  }
}

async function walkInto(guard: Guard, dir: Dir, prefix: string, out: PlanEntry[], max: number, input: string): Promise<void> {
  const items = (await readdir(dir.at(), { withFileTypes: true })).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const e of items) {
    const real = dir.child(e.name);
    if (guard.ruleOf(real) !== null) continue;
    const rel = `${prefix}${e.name}`;
    if (e.isFile()) {
      if (out.length >= max) throw tooMany(input, max);
      out.push({ rel, real, kind: 'file', mode: 0, mtime: new Date(0) });
    } else if (e.isDirectory()) {
      let sub: Dir;
      try {
        sub = await openDir(dir.at(e.name), real);
      } catch {
        continue; // gone or replaced meanwhile
      }
      try {
        const st = await sub.fh.stat();
        if (!guard.agentMay(st, MAY_READ | MAY_SEARCH)) continue; // nor a folder it may not list and enter
        if (out.length >= max) throw tooMany(input, max);
        out.push({ rel: `${rel}/`, real, kind: 'dir', mode: st.mode & 0o7777, mtime: st.mtime });
        await walkInto(guard, sub, `${rel}/`, out, max, input);
      } finally {
        await sub.close();
      }
    }
  }
}

interface Opened {
  entry: PlanEntry;
  /** null for folders. */
  fh: FileHandle | null;
  size: number;
  mode: number;
  mtime: Date;
  /** The whole content, deflated ahead, for small files. */
  content: Prepared | null;
}

/**
 * What an archive leaves out of a planned file, judged on the inode it opened: a protected file, or
 * one the agent user may not read (as the API refuses it: paths/guard.ts). Judged at open rather
 * than in the walk, so a tree costs no extra stat per file.
 */
export function archiveLeavesOut(guard: Guard): (st: Stats, target: string) => Promise<boolean> {
  const isProtected = guard.inodeChecker();
  return async (st, target) => !guard.agentMay(st, MAY_READ) || (await isProtected(st, target));
}

/**
 * Opens a planned file and checks it is still what was planned (the planned path, a regular file,
 * not a protected inode); null when it is not (left out). For download_dir_zip and _zstd.
 */
export async function openPlannedFile(isProtected: (st: Stats, target: string) => Promise<boolean>, entry: PlanEntry): Promise<{ fh: FileHandle; st: Stats } | null> {
  let fh: FileHandle;
  try {
    fh = await open(entry.real, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch {
    return null;
  }
  try {
    const self = `/proc/self/fd/${fh.fd}`;
    const st = await fh.stat();
    if (!st.isFile() || (await readlink(self)) !== entry.real || (await isProtected(st, self))) {
      await fh.close();
      return null;
    }
    return { fh, st };
  } catch {
    await fh.close().catch(() => undefined);
    return null;
  }
}

async function openPlanned(isProtected: (st: Stats, target: string) => Promise<boolean>, entry: PlanEntry, level: number): Promise<Opened | null> {
  const opened = await openPlannedFile(isProtected, entry);
  if (opened === null) return null;
  const { fh, st } = opened;
  try {
    let content: Prepared | null = null;
    if (st.size <= SMALL_FILE_BYTES) {
      const buf = Buffer.alloc(st.size);
      let got = 0;
      while (got < st.size) {
        const { bytesRead } = await fh.read(buf, got, st.size - got, got);
        if (bytesRead === 0) break;
        got += bytesRead;
      }
      content = await ZipWriter.prepare(buf.subarray(0, got), level);
    }
    return { entry, fh, size: st.size, mode: st.mode & 0o7777, mtime: st.mtime, content };
  } catch {
    await fh.close().catch(() => undefined);
    return null;
  }
}

/** Writes the planned tree as a zip into `sink`; resolves when the archive is complete. */
export async function writeZip(guard: Guard, plan: ZipPlan, sink: ZipSink, level = 6): Promise<{ files: number; bytes: number }> {
  const zip = new ZipWriter(sink, level);
  const isProtected = archiveLeavesOut(guard);
  const ahead: Promise<Opened | null>[] = [];
  let next = 0;
  let files = 0;
  const fill = (): void => {
    while (ahead.length < READ_AHEAD && next < plan.entries.length) {
      const entry = plan.entries[next++] as PlanEntry;
      ahead.push(entry.kind === 'file' ? openPlanned(isProtected, entry, level) : Promise.resolve({ entry, fh: null, size: 0, mode: entry.mode, mtime: entry.mtime, content: null }));
    }
  };
  try {
    fill();
    while (ahead.length > 0) {
      const o = await (ahead.shift() as Promise<Opened | null>);
      fill();
      if (o === null) continue;
      const meta = { mode: o.mode, mtime: o.mtime };
      if (o.fh === null) {
        await zip.addDirectory(o.entry.rel, meta);
        continue;
      }
      try {
        if (o.content !== null) await zip.addPrepared(o.entry.rel, o.content, meta);
        else await zip.addStream(o.entry.rel, o.fh.createReadStream({ start: 0, end: o.size - 1, highWaterMark: SMALL_FILE_BYTES }), o.size, meta);
        files++;
      } finally {
        await o.fh.close().catch(() => undefined);
      }
    }
    await zip.finish();
    return { files, bytes: zip.bytes };
  } finally {
    // On failure (the client left): close every file opened ahead.
    for (const p of ahead) void p.then((o) => o?.fh?.close().catch(() => undefined));
  }
}
