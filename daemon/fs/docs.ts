// The OpenAPI facts of the files routes: response schemas (the SDK's shapes), request bodies, and
// the texts that state every rule, limit and choice, with the one table of errors.
import { z } from 'zod';
import { lazy } from '../core/lazy.js';
import type { Config } from '../core/config.js';
import { SSE_HEARTBEAT_MS } from '../core/streams/sse.js';

export const fileInfoSchema = lazy(() => z.object({
  name: z.string().describe('base name ("/" for the root)'),
  path: z.string().describe('the real path: every symlink resolved'),
  is_dir: z.boolean(),
  size_bytes: z.number().int().describe('0 for folders'),
  mode: z.string().describe('as ls -l writes it: drwxr-xr-x, -rw-r--r--, lrwxrwxrwx'),
  mod_time: z.string().describe('ISO 8601, UTC'),
}));
export const listSchema = lazy(() => z.array(fileInfoSchema()));

const pathField = (what: string) => z.string().describe(`absolute path of ${what}`);
const modeField = (def: string) => z.string().describe(`octal mode of 3 or 4 digits (e.g. 644, 0755); default ${def}; setuid and setgid bits are refused`);

export const createDirectoryBody = lazy(() => z.strictObject({ path: pathField('the folder'), mode: modeField('755').optional() }));
export const pathBody = lazy(() => z.strictObject({ path: pathField('the file or folder') }));
export const moveBody = lazy(() => z.strictObject({ src_path: pathField('what is moved'), dest_path: pathField('its new path (not a folder to move it into)') }));
export const permissionsBody = lazy(() => z.strictObject({
  path: pathField('the file or folder (a final symlink is followed)'),
  mode: modeField('(required)'),
  owner: z.string().optional().describe('user name or numeric uid: only the agent user itself (the files API acts with its rights)'),
  group: z.string().optional().describe('group name or numeric gid'),
}));
export const watchBody = lazy(() => z.strictObject({ path: pathField('the folder to watch'), recursive: z.boolean().optional().describe('watch every folder below too; default false') }));
export const watchStarted = lazy(() => z.object({ watch_id: z.string() }));

const FS_ERRORS =
  'Errors of every files route (one table): 400 bad_request — a path that is empty, relative, has a NUL or is over 4095 bytes, ' +
  'a bad mode, owner or group, too many levels of symbolic links; ' +
  '403 path_forbidden with inner_error.code naming the rule — state_dir (the daemon\'s state directory or anything inside it: ' +
  'token, keys, proxy store, extension keys, Chromium profile), special_filesystem (/proc, /sys, /dev, or such a file system ' +
  'mounted elsewhere), protected_file (BROWSERD_KEYS_FILE, BROWSERD_PROXY_PROVIDERS_FILE, or another name — a hard link — of a ' +
  'protected file), special_file (reading a device, fifo or socket), permission_denied (the kernel refused the daemon\'s user), ' +
  'read_only; 404 not_found — the path (or a folder on it) does not exist; 409 not_a_directory (a file where a folder is expected), ' +
  'is_a_directory (a folder where a file is expected), already_exists, directory_not_empty, busy (a mount point or a file that ' +
  'changed while it was opened); 413 payload_too_large (the limit and its setting are in the message); 507 no_space. ' +
  'How paths are resolved: each component from an open handle of the folder before it, symlinks read and followed by the daemon ' +
  '(at most 40), `..` to the parent of the folder actually reached; every folder entered and every final path must break no rule, ' +
  'whatever the spelling (`//`, `..`, symlinks, /proc/self/root/…); what was opened is checked again (its inode, its path as the ' +
  'kernel reports it). Paths in answers are real paths.';

export function describe(text: string): string {
  return `${text} ${FS_ERRORS}`;
}

export function limitsText(c: Config['fs']): Record<'write' | 'upload' | 'zip' | 'zstd' | 'list' | 'download' | 'downloadZstd' | 'watch', string> {
  return {
    write:
      `Streams the raw body (any content type) to a temp file beside the target (.<name>.<random>.tmp, created O_EXCL), sets its mode ` +
      `(default 644, umask not applied), then renames it over the target: a reader sees the old file or the new one, never a part; of ` +
      `concurrent writers the last rename wins; a body that fails or is cut off leaves nothing. No fsync (the durability of cp). ` +
      `A final symlink is followed; missing parent folders are created (0755). At most ${c.maxFileBytes} bytes (BROWSERD_FS_MAX_FILE_BYTES): ` +
      'a larger Content-Length is 413 before any byte is read.',
    upload:
      'multipart/form-data, the list `files` of items `{dest_path, file}`: repeated pairs `files[][dest_path]` + `files[][file]` ' +
      '(TypeScript, Python clients) or `files.dest_path` + `files.file` (Go clients), paired k-th with k-th, or indexed ' +
      '`files[N][dest_path]` / `files[N].dest_path` with `files[N][file]`; a pair may come in either order. Each file streams to a temp ' +
      'file beside its destination (a file sent before its dest_path, or into a folder that does not exist yet, waits in the state ' +
      'dir\'s spool first); only when the whole body is in and every item is valid are they renamed into place (mode 644, missing ' +
      'parent folders created 0755), so a failed upload leaves nothing. Two items with the same dest_path are a 400. ' +
      `Limits: ${c.maxUploadFiles} files (BROWSERD_FS_MAX_UPLOAD_FILES), ${c.maxFileBytes} bytes per file (BROWSERD_FS_MAX_FILE_BYTES), ` +
      `${c.maxUploadBytes} bytes per request (BROWSERD_FS_MAX_UPLOAD_BYTES).`,
    zip:
      'multipart/form-data with `dest_path` (a folder) and `zip_file`. The archive is unpacked by the same safe unzip as extension ' +
      'uploads into a temp folder beside the destination, then renamed into place when the destination does not exist (missing parent ' +
      'folders come with it in the same rename), or merged into the existing folder (its files replace files of the same name; a file ' +
      'where the archive has a folder, or the reverse, is 409 and nothing moves). Refused archives are 422 archive_rejected with ' +
      'inner_error.code bad_zip, zip_slip (absolute path or ..), bad_entry_name (backslash, NUL, empty segment), duplicate_entry, ' +
      'symlink, special_file, encrypted, unsupported_compression, too_many_entries, size_mismatch (an entry larger or smaller than it ' +
      'declares); an unpacked size over the limit is 413; in every refusal nothing is written. Files are written 0644 and folders 0755. ' +
      `Limits: ${c.maxZipBytes} bytes of archive (BROWSERD_FS_MAX_ZIP_BYTES), ${c.maxZipEntries} entries (BROWSERD_FS_MAX_ZIP_ENTRIES), ` +
      `${c.maxUnpackedBytes} bytes unpacked (BROWSERD_FS_MAX_UNPACKED_BYTES), ${c.maxUploadBytes} bytes per request (BROWSERD_FS_MAX_UPLOAD_BYTES).`,
    zstd:
      'multipart/form-data with `dest_path` (a folder) and `archive_file`: a tar (ustar or pax) compressed with zstd. Placed like ' +
      'upload_zip, unpacked by the same safe unpack (core/zip/tar.ts); refusals are 422 archive_rejected with inner_error.code ' +
      'bad_zstd (not zstd data), bad_tar (not a tar, checksum, truncated header), zip_slip, bad_entry_name, duplicate_entry, symlink, ' +
      'hardlink, special_file (device, fifo), too_many_entries, size_mismatch (truncated entry); nothing is written then. The same ' +
      'limits as upload_zip (BROWSERD_FS_MAX_ZIP_BYTES, BROWSERD_FS_MAX_ZIP_ENTRIES, BROWSERD_FS_MAX_UNPACKED_BYTES).',
    downloadZstd:
      'A tar (ustar, pax names past 255 bytes) compressed with zstd level 3, built while it is sent, of the same entries as ' +
      'download_dir_zip (folders and regular files, sorted; symlinks, devices, fifos, sockets and what the files API refuses left out). ' +
      `More than ${c.maxZipEntries} entries (BROWSERD_FS_MAX_ZIP_ENTRIES) is 413 before the first byte; an error after it cuts the response.`,
    list:
      'The entries of the folder (not recursive), sorted by name; symlinks are listed as links (not followed). Entries the files API ' +
      `refuses (the state directory, protected files) are left out. More than ${c.maxListEntries} entries (BROWSERD_FS_MAX_LIST_ENTRIES): 413.`,
    download:
      'A zip (deflate, zip64 when needed) built while it is sent: folders (with their modes and times), regular files (with their modes ' +
      'and times), names relative to the folder, sorted. Left out: symlinks (not followed), devices, fifos, sockets, whatever the files ' +
      'API refuses, and files that vanish meanwhile. Every file is read once from disk: memory stays flat whatever the size. The tree ' +
      `is walked before the answer starts: more than ${c.maxZipEntries} entries (BROWSERD_FS_MAX_ZIP_ENTRIES) is 413. An error after ` +
      'the first byte cuts the response (the archive then lacks its central directory and no unzip takes it).',
    watch:
      'inotify through one non-recursive fs.watch per folder (Node 20\'s recursive mode watches every file and scans on the event ' +
      'loop, so the recursion is the daemon\'s own; it never enters the state directory). Events: CREATE (the path exists after an ' +
      'inotify rename/create), DELETE (it does not), WRITE (content or attributes changed); RENAME is never sent: a move is DELETE ' +
      'of the old path and CREATE of the new. A new folder of a recursive watch is watched and scanned at once, its entries sent as ' +
      `CREATE (one created in that instant may come twice). Consecutive identical events are sent once. At most ${c.maxWatches} watches ` +
      `(BROWSERD_FS_MAX_WATCHES, 429 past it); at most ${c.watchMaxDirs} folders per watch (BROWSERD_FS_WATCH_MAX_DIRS: a larger tree is ` +
      '429 at start, not retryable; folders created later past it are not watched); events wait in a queue of ' +
      `${c.watchQueue} (BROWSERD_FS_WATCH_QUEUE) for the reader. A watch without a reader for ${c.watchIdleMs / 1000} s ` +
      '(BROWSERD_FS_WATCH_IDLE_SEC) is stopped. The watch ends (after a DELETE of the folder itself) when its folder is deleted or moved.',
  };
}

export const EVENTS_TEXT =
  'Server-Sent Events: each event `data: {"type":"CREATE"|"WRITE"|"DELETE","path","name","is_dir"}`; when the queue overflowed, ' +
  '`event: lost` with `data: {"type":"LOST","path":<watched folder>,"count":N}` (N events dropped, the oldest kept); a comment line ' +
  `every ${SSE_HEARTBEAT_MS / 1000} s while idle. Events are taken from the queue as they are sent (no replay). One reader at a ` +
  'time: a new reader takes over and the previous stream ends. The stream ends when the watch ends. A write holds at most 256 KiB; a ' +
  'reader that takes none of it for BROWSERD_SSE_STALL_MS (30 s by default) gets `event: dropped` with `data: {"type":"DROPPED","path","reason"}` and is dropped (the watch goes on).';
