// The multipart routes. upload: the list `files` of `{dest_path, file}` in every encoding the
// generated clients send (core/multipart/pairs.ts); upload_zip: `dest_path` + `zip_file`.
// A file part whose destination came before it (every generated client sends it first) and whose
// folder exists streams straight into a temp file beside its destination; otherwise into the
// spool folder of the state dir, moved beside its destination once the body is in. Nothing is
// renamed into place before the whole body is in and every item is valid: a failed upload leaves
// nothing, not even the folders it would have created.
import { randomUUID } from 'node:crypto';
import { constants, createReadStream } from 'node:fs';
import { chmod, mkdir, open, rename, rm, unlink } from 'node:fs/promises';
import type { IncomingMessage } from 'node:http';
import path from 'node:path';
import type { Config } from '../core/config.js';
import { BadRequestError, ConflictError, NotFoundError, OperationFailedError } from '../core/errors.js';
import { pairListParts, parseListField, textBefore, type ListSpec } from '../core/multipart/pairs.js';
import { receiveMultipart, type ReceivedPart } from '../core/multipart/receive.js';
import { ArchiveError, safeUnzip, type UnzipResult } from '../core/zip/unzip.js';
import { errnoOf, mapped } from './errno.js';
import type { Guard } from './guard.js';
import { placeTree } from './merge.js';
import { checkPathInput, resolve, resolveTail, type Dir, type Target } from './resolve.js';
import { commitTemp, pump, resolveForWrite, tempName } from './write.js';

export type FsLimits = Config['fs'];

export interface UploadDeps {
  guard: Guard;
  /** The daemon's own folder for parts that cannot go beside their destination yet. */
  spoolDir: string;
  limits: FsLimits;
}

const FILES = { list: 'files', text: 'dest_path', file: 'file' } as const;
/** Mode of uploaded files (the SDK's upload has no mode field). */
const UPLOAD_MODE = 0o644;

/** Why a dest_path is refused at once (400), or null. */
function destProblem(value: string): string | null {
  try {
    checkPathInput(value, 'dest_path');
    return null;
  } catch (err) {
    return (err as BadRequestError).message.replace(/^dest_path: /, '');
  }
}

/** A temp file beside its destination, or a spool file; removed unless committed. */
interface Staged {
  file: string;
  target: Target | null;
  tmpName: string | null;
}

class Staging {
  private readonly staged = new Map<string, Staged>();
  constructor(private readonly spoolDir: string) {}

  spool(): string {
    const file = path.join(this.spoolDir, randomUUID());
    this.staged.set(file, { file, target: null, tmpName: null });
    return file;
  }

  beside(t: Target): string {
    const tmpName = tempName(t.name);
    const file = t.parent.at(tmpName);
    this.staged.set(file, { file, target: t, tmpName });
    return file;
  }

  get(file: string): Staged | undefined {
    return this.staged.get(file);
  }

  /** Moves a spooled part beside its destination (a copy when they are on different file systems). */
  async unspool(s: Staged, t: Target): Promise<void> {
    const tmpName = tempName(t.name);
    const dest = t.parent.at(tmpName);
    try {
      await rename(s.file, dest);
    } catch (err) {
      if (errnoOf(err) !== 'EXDEV') throw err;
      const out = await open(dest, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
      try {
        await pump(createReadStream(s.file), out.createWriteStream(), null); // the stream closes the handle
      } finally {
        await out.close().catch(() => undefined);
      }
      await unlink(s.file).catch(() => undefined);
    }
    this.staged.set(s.file, { file: dest, target: t, tmpName });
  }

  committed(file: string): void {
    this.staged.delete(file);
  }

  /** Removes every temp and spool file left, releases every destination folder. */
  async cleanup(): Promise<void> {
    const targets = new Set<Target>();
    for (const s of this.staged.values()) {
      await rm(s.file, { force: true }).catch(() => undefined);
      if (s.target !== null) targets.add(s.target);
    }
    for (const t of targets) await t.release();
    this.staged.clear();
  }
}

/** The destination a part can stream beside now, or null (its folder does not exist yet: spool). */
async function besideNow(guard: Guard, dest: string, kind: 'file' | 'dir'): Promise<Target | null> {
  let t: Target;
  try {
    t = kind === 'file' ? await resolveForWrite(guard, dest, false) : await resolve(guard, dest, { follow: true, allowMissing: true });
  } catch (err) {
    if (err instanceof NotFoundError) return null;
    throw err;
  }
  if (kind === 'dir' && t.stat !== null && !t.stat.isDirectory()) {
    await t.release();
    throw new ConflictError('not_a_directory', `${dest} exists and is not a folder`);
  }
  return t;
}

export async function receiveFiles(req: IncomingMessage, deps: UploadDeps): Promise<number> {
  const { guard, limits } = deps;
  const staging = new Staging(deps.spoolDir);
  const spec: ListSpec = { ...FILES, maxItems: limits.maxUploadFiles, unique: true, checkText: destProblem };
  try {
    const parts = await receiveMultipart(req, multipartLimits(limits, limits.maxFileBytes, 'file', 'BROWSERD_FS_MAX_FILE_BYTES'), async (fieldName, _i, received) => {
      if (parseListField(fieldName, FILES)?.field !== 'file') return null;
      const dest = textBefore(received, FILES);
      if (dest === null || destProblem(dest) !== null) return staging.spool();
      const t = await besideNow(guard, dest, 'file');
      return t === null ? staging.spool() : staging.beside(t);
    });
    const items = pairListParts(parts, spec);
    for (const item of items) {
      const s = staging.get(item.file);
      if (s !== undefined && s.target === null) await mapped(item.text, async () => staging.unspool(s, await resolveForWrite(guard, item.text)));
    }
    for (const item of items) {
      const s = staging.get(item.file) as Staged;
      await commitTemp(guard, s.target as Target, s.tmpName as string, UPLOAD_MODE);
      staging.committed(item.file);
    }
    return items.length;
  } finally {
    await staging.cleanup();
  }
}

function multipartLimits(limits: FsLimits, maxFileBytes: number, noun: string, fileSetting: string): Parameters<typeof receiveMultipart>[1] {
  return {
    maxParts: limits.maxUploadFiles,
    maxFileBytes,
    maxRequestBytes: limits.maxUploadBytes,
    listName: 'files',
    fileNoun: noun,
    fileSetting,
    requestSetting: 'BROWSERD_FS_MAX_UPLOAD_BYTES',
  };
}

/** dest_path and zip_file, each exactly once; any other field is a 400 detail. */
function zipFields(parts: ReceivedPart[]): { dest: string; zip: string } {
  const problems: string[] = [];
  const dests = parts.filter((p) => p.fieldName === 'dest_path');
  const zips = parts.filter((p) => p.fieldName === 'zip_file');
  for (const p of parts) if (p.fieldName !== 'dest_path' && p.fieldName !== 'zip_file') problems.push(`${p.fieldName}: is not a field of this request (it takes dest_path and zip_file)`);
  if (dests.length !== 1) problems.push(dests.length === 0 ? 'dest_path: is required' : 'dest_path: is given more than once');
  if (zips.length !== 1) problems.push(zips.length === 0 ? 'zip_file: is required' : 'zip_file: is given more than once');
  if (dests[0] !== undefined && dests[0].kind !== 'field') problems.push('dest_path: must be a text field, not a file');
  if (zips[0] !== undefined && zips[0].kind !== 'file') problems.push('zip_file: must be a file part (with a filename)');
  const dest = dests[0]?.value;
  if (dest !== undefined) {
    const why = destProblem(dest);
    if (why !== null) problems.push(`dest_path: ${why}`);
  }
  if (problems.length > 0) throw new BadRequestError(problems);
  return { dest: dest as string, zip: zips[0]?.file as string };
}

async function unpack(zip: string, dir: string, limits: FsLimits): Promise<UnzipResult> {
  try {
    return await safeUnzip(zip, dir, {
      maxEntries: limits.maxZipEntries,
      maxUnpackedBytes: limits.maxUnpackedBytes,
      unpackedWhat: 'the unpacked archive',
      unpackedSetting: 'BROWSERD_FS_MAX_UNPACKED_BYTES',
    });
  } catch (err) {
    if (err instanceof ArchiveError) throw new OperationFailedError('archive_rejected', `the archive is refused: ${err.message}`, { code: err.causeCode, message: err.message });
    throw err;
  }
}

/**
 * upload_zip: the archive unpacked (every check of the safe unzip) into a temp folder beside the
 * destination, then renamed into place or merged into the existing folder. When folders of the
 * destination are missing, the temp folder stands for the first of them and holds the rest, so
 * that one rename creates them all and a refused archive leaves nothing.
 */
export async function receiveZip(req: IncomingMessage, deps: UploadDeps): Promise<UnzipResult> {
  const { guard, limits } = deps;
  const staging = new Staging(deps.spoolDir);
  let target: Target | null = null;
  let temp: { parent: Dir; name: string } | null = null;
  try {
    const parts = await receiveMultipart(req, multipartLimits(limits, limits.maxZipBytes, 'archive', 'BROWSERD_FS_MAX_ZIP_BYTES'), async (fieldName, _i, received) => {
      if (fieldName !== 'zip_file') return null;
      const dest = received.find((p) => p.fieldName === 'dest_path' && p.kind === 'field')?.value;
      if (dest === undefined || destProblem(dest) !== null || target !== null) return staging.spool();
      target = await besideNow(guard, dest, 'dir');
      return target === null ? staging.spool() : staging.beside(target);
    });
    const { dest, zip } = zipFields(parts);
    target ??= await besideNow(guard, dest, 'dir');
    if (target !== null) {
      const t: Target = target;
      if (t.name === '') throw BadRequestError.field('dest_path', '/ cannot be replaced by an archive');
      temp = { parent: t.parent, name: tempName(t.name) };
      await mapped(dest, () => mkdir(t.parent.at((temp as { name: string }).name), { mode: 0o700 }));
      const result = await unpack(zip, t.parent.at(temp.name), limits);
      await chmod(t.parent.at(temp.name), 0o755);
      await placeTree(guard, t, temp.name);
      return result;
    }
    const { dir, missing } = await resolveTail(guard, dest);
    temp = { parent: dir, name: tempName(missing[0] as string) };
    const top = dir.at(temp.name);
    await mapped(dest, () => mkdir(top, { mode: 0o700 }));
    const inner = path.join(top, ...missing.slice(1));
    await mapped(dest, () => mkdir(inner, { recursive: true, mode: 0o755 }));
    const result = await unpack(zip, inner, limits);
    await chmod(top, 0o755);
    await mapped(dest, () => rename(top, dir.at(missing[0] as string)));
    return result;
  } finally {
    if (temp !== null) await rm(temp.parent.at(temp.name), { recursive: true, force: true }).catch(() => undefined);
    await staging.cleanup();
    await (target as Target | null)?.release();
    if (temp !== null) await temp.parent.close();
  }
}
