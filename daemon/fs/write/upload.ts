// The multipart routes. upload: the list `files` of `{dest_path, file}` in every encoding the
// generated clients send (core/multipart/pairs.ts); upload_zip: `dest_path` + `zip_file`.
// A file part whose destination came before it (every generated client sends it first) and whose
// folder exists streams straight into a temp file beside its destination; otherwise into the
// spool folder of the state dir, moved beside its destination once the body is in. Nothing is
// renamed into place before the whole body is in and every item is valid: a failed upload leaves
// nothing, not even the folders it would have created.
import { randomUUID } from 'node:crypto';
import { constants, createReadStream } from 'node:fs';
import { chmod, mkdir, open, rename, rm } from 'node:fs/promises';
import type { IncomingMessage } from 'node:http';
import path from 'node:path';
import type { Config } from '../../core/config.js';
import { BadRequestError, ConflictError, NotFoundError, OperationFailedError } from '../../core/errors.js';
import { pairListParts, parseListField, textBefore, type ListSpec } from '../../core/multipart/pairs.js';
import { receiveMultipart, type ReceivedPart } from '../../core/multipart/receive.js';
import { safeUntarZstd } from '../../core/zip/tar.js';
import { ArchiveError, safeUnzip, type UnzipResult } from '../../core/zip/unzip.js';
import { errnoOf, mapped } from '../paths/errno.js';
import { MAY_SEARCH, MAY_WRITE, type Guard } from '../paths/guard.js';
import { handOverOne, handOverTree } from './hand-over.js';
import { placeTree } from './merge.js';
import { checkPathInput, resolve, resolveTail, type Dir, type Target } from '../paths/resolve.js';
import { commitTemp, pump, resolveForWrite, tempName } from './write.js';

type FsLimits = Config['fs'];

interface UploadDeps {
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

/** Where a received part is: a temp file beside its destination, or a spool file (no target yet). */
interface Staged {
  file: string;
  target: Target | null;
  tmpName: string | null;
}

/** The parts of one request on disk: every file is removed and every folder handle released at the end, unless committed. */
class Staging {
  private readonly byPart = new Map<string, Staged>();
  private readonly files = new Set<string>();
  private readonly targets = new Set<Target>();
  constructor(private readonly spoolDir: string) {}

  spool(): string {
    const file = path.join(this.spoolDir, randomUUID());
    this.byPart.set(file, { file, target: null, tmpName: null });
    this.files.add(file);
    return file;
  }

  beside(t: Target): string {
    const tmpName = tempName(t.name);
    const file = t.parent.at(tmpName);
    this.targets.add(t);
    this.byPart.set(file, { file, target: t, tmpName });
    this.files.add(file);
    return file;
  }

  /** Where the part first stored at `part` is now. */
  get(part: string): Staged | undefined {
    return this.byPart.get(part);
  }

  /** Moves a spooled part beside its destination `t` (a copy when they are on different file systems). */
  async unspool(part: string, t: Target): Promise<void> {
    this.targets.add(t);
    const tmpName = tempName(t.name);
    const dest = t.parent.at(tmpName);
    this.files.add(dest);
    try {
      await rename(part, dest);
    } catch (err) {
      if (errnoOf(err) !== 'EXDEV') throw err;
      const out = await open(dest, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
      try {
        await pump(createReadStream(part), out.createWriteStream(), null); // the stream closes the handle
      } finally {
        await out.close().catch(() => undefined);
      }
    }
    this.byPart.set(part, { file: dest, target: t, tmpName });
  }

  committed(s: Staged): void {
    this.files.delete(s.file);
  }

  async cleanup(): Promise<void> {
    for (const f of this.files) await rm(f, { force: true }).catch(() => undefined);
    for (const t of this.targets) await t.release();
    this.files.clear();
    this.targets.clear();
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
  try {
    if (kind === 'dir' && t.stat !== null && !t.stat.isDirectory()) throw new ConflictError('not_a_directory', `${dest} exists and is not a folder`);
    // An archive is unpacked beside its folder, then renamed or merged into it: the agent user must be able to write there.
    if (kind === 'dir' && guard.agent !== null) guard.checkAgent(await t.parent.fh.stat(), MAY_WRITE | MAY_SEARCH, t.shown, `write in ${t.parent.real}`);
  } catch (err) {
    await t.release();
    throw err;
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
      if (staging.get(item.file)?.target === null) await mapped(item.text, async () => staging.unspool(item.file, await resolveForWrite(guard, item.text)));
    }
    for (const item of items) {
      const s = staging.get(item.file) as Staged;
      await commitTemp(guard, s.target as Target, s.tmpName as string, UPLOAD_MODE);
      staging.committed(s);
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

/** dest_path and the archive's field (zip_file, or archive_file for tar.zst), each exactly once; any other field is a 400 detail. */
function zipFields(parts: ReceivedPart[], field: string): { dest: string; zip: string } {
  const problems: string[] = [];
  const dests = parts.filter((p) => p.fieldName === 'dest_path');
  const zips = parts.filter((p) => p.fieldName === field);
  for (const p of parts) if (p.fieldName !== 'dest_path' && p.fieldName !== field) problems.push(`${p.fieldName}: is not a field of this request (it takes dest_path and ${field})`);
  if (dests.length !== 1) problems.push(dests.length === 0 ? 'dest_path: is required' : 'dest_path: is given more than once');
  if (zips.length !== 1) problems.push(zips.length === 0 ? `${field}: is required` : `${field}: is given more than once`);
  if (dests[0] !== undefined && dests[0].kind !== 'field') problems.push('dest_path: must be a text field, not a file');
  if (zips[0] !== undefined && zips[0].kind !== 'file') problems.push(`${field}: must be a file part (with a filename)`);
  const dest = dests[0]?.value;
  if (dest !== undefined) {
    const why = destProblem(dest);
    if (why !== null) problems.push(`dest_path: ${why}`);
  }
  if (problems.length > 0) throw new BadRequestError(problems);
  return { dest: dest as string, zip: zips[0]?.file as string };
}

/** The archive formats of upload_zip and upload_zstd: the multipart field and the safe unpack of each. */
export type ArchiveFormat = 'zip' | 'tar.zst';
const ARCHIVE_FIELD: Record<ArchiveFormat, string> = { zip: 'zip_file', 'tar.zst': 'archive_file' };

async function unpack(zip: string, dir: string, limits: FsLimits, format: ArchiveFormat): Promise<UnzipResult> {
  const archiveLimits = {
    maxEntries: limits.maxZipEntries,
    maxUnpackedBytes: limits.maxUnpackedBytes,
    unpackedWhat: 'the unpacked archive',
    unpackedSetting: 'BROWSERD_FS_MAX_UNPACKED_BYTES',
  };
  try {
    return format === 'zip' ? await safeUnzip(zip, dir, archiveLimits) : await safeUntarZstd(zip, dir, archiveLimits);
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
export async function receiveZip(req: IncomingMessage, deps: UploadDeps, format: ArchiveFormat = 'zip'): Promise<UnzipResult> {
  const field = ARCHIVE_FIELD[format];
  const { guard, limits } = deps;
  const staging = new Staging(deps.spoolDir);
  let target: Target | null = null;
  let temp: { parent: Dir; name: string } | null = null;
  try {
    const parts = await receiveMultipart(req, multipartLimits(limits, limits.maxZipBytes, 'archive', 'BROWSERD_FS_MAX_ZIP_BYTES'), async (fieldName, _i, received) => {
      if (fieldName !== field) return null;
      const dest = received.find((p) => p.fieldName === 'dest_path' && p.kind === 'field')?.value;
      if (dest === undefined || destProblem(dest) !== null || target !== null) return staging.spool();
      target = await besideNow(guard, dest, 'dir');
      return target === null ? staging.spool() : staging.beside(target);
    });
    const { dest, zip } = zipFields(parts, field);
    target ??= await besideNow(guard, dest, 'dir');
    if (target !== null) {
      const t: Target = target;
      if (t.name === '') throw BadRequestError.field('dest_path', '/ cannot be replaced by an archive');
      const tmpName = tempName(t.name);
      temp = { parent: t.parent, name: tmpName };
      await mapped(dest, () => mkdir(t.parent.at(tmpName), { mode: 0o700 }));
      const result = await unpack(zip, t.parent.at(tmpName), limits, format);
      await mapped(dest, () => handOverTree(guard, t.parent.at(tmpName)));
      await chmod(t.parent.at(tmpName), 0o755);
      if ((await placeTree(guard, t, tmpName)) === 'renamed') await mapped(dest, () => handOverOne(guard, t.at));
      return result;
    }
    const { dir, missing } = await resolveTail(guard, dest);
    const first = missing[0];
    if (first === undefined) {
      await dir.close();
      throw new ConflictError('busy', `${dest} was created while the archive arrived; try again`, { retryable: true });
    }
    if (guard.agent !== null) {
      try {
        guard.checkAgent(await dir.fh.stat(), MAY_WRITE | MAY_SEARCH, dest, `create a folder in ${dir.real}`);
      } catch (err) {
        await dir.close();
        throw err;
      }
    }
    temp = { parent: dir, name: tempName(first) };
    const top = dir.at(temp.name);
    await mapped(dest, () => mkdir(top, { mode: 0o700 }));
    let inner = top;
    for (const name of missing.slice(1)) {
      inner = path.join(inner, name);
      await mapped(dest, () => mkdir(inner, { mode: 0o755 }));
      await chmod(inner, 0o755); // exactly 0755, whatever the umask
    }
    const result = await unpack(zip, inner, limits, format);
    await mapped(dest, () => handOverTree(guard, top));
    await chmod(top, 0o755);
    await mapped(dest, () => rename(top, dir.at(first)));
    await mapped(dest, () => handOverOne(guard, dir.at(first)));
    return result;
  } finally {
    if (temp !== null) await rm(temp.parent.at(temp.name), { recursive: true, force: true }).catch(() => undefined);
    await staging.cleanup();
    await (target as Target | null)?.release();
    if (temp !== null) await temp.parent.close();
  }
}
