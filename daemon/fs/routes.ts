// The files routes (the SDK's `browsers.fs`, route by route), their scopes and OpenAPI facts.
// fs:read for what changes no file (reads, listings, archives, watches), fs:write for the rest.
import type { ServerResponse } from 'node:http';
import { z, type ZodType } from 'zod';
import { lazy } from '../core/lazy.js';
import type { Config } from '../core/config.js';
import type { Metrics } from '../core/metrics.js';
import { PayloadTooLargeError } from '../core/errors.js';
import type { ZipSink } from '../core/zip/write.js';
import { qRequired, qString } from '../http/query.js';
import type { Reply, RequestContext, Route, RouteDoc } from '../http/router.js';
import { routesIn } from '../http/route.js';
import * as doc from './docs.js';
import { fileInfo, listDir } from './read/entries.js';
import type { Guard } from './paths/guard.js';
import { parseMode, parseOwner } from './paths/owners.js';
import { checkPathInput } from './paths/resolve.js';
import { openForRead, parseRange, sendFile } from './read/send.js';
import { createDirectory, deleteDirectory, deleteFile, move, setPermissions } from './write/tree.js';
import { receiveFiles, receiveZip } from './write/upload.js';
import { streamWatch } from './watch/watch-sse.js';
import type { WatchSet } from './watch/watches.js';
import { resolveForWrite, writeAtomic } from './write/write.js';
import { planZip, writeZip } from './read/zip-download.js';
import { tarSource, zstdCompressor } from './read/tar-download.js';
import { pipeline } from 'node:stream/promises';

const route = routesIn('daemon/fs/routes.ts');

export interface RouteDeps {
  config: Config;
  metrics: Metrics;
  guard: Guard;
  watches: WatchSet;
  spoolDir: string;
}

const F = '/browsers/{id}/fs';
const pathQuery = lazy(() => z.strictObject({ path: qRequired('absolute path') }));
const writeQuery = lazy(() => z.strictObject({ path: qRequired('absolute path of the file'), mode: qString('octal mode (e.g. 644); default 644', 4) }));
const BINARY = { type: 'string', format: 'binary' };
const binary = (description: string, mediaType = 'application/octet-stream') => ({ description, mediaType, schema: BINARY });
const multipart = (schema: Record<string, unknown>) => ({ mediaType: 'multipart/form-data', schema });
const done = { 204: { description: 'done' } };

/** OpenAPI facts whose description gets the one table of errors appended. */
type Facts = Omit<RouteDoc, 'description'> & { description: string };
const described = <D extends Facts>(facts: D): D => ({ ...facts, description: doc.describe(facts.description) });

function pathOf(ctx: RequestContext): string {
  const p = ctx.query.path as string;
  checkPathInput(p);
  return p;
}

/** The response as a zip sink: waits for drain, fails once the client has gone. */
function responseSink(res: ServerResponse): ZipSink {
  return {
    write: (chunk) =>
      new Promise<void>((resolve, reject) => {
        if (res.destroyed) return reject(new Error('the client went away'));
        if (res.write(chunk)) return resolve();
        const settle = (): void => {
          res.off('drain', settle).off('close', settle);
          if (res.destroyed && !res.writableFinished) reject(new Error('the client went away'));
          else resolve();
        };
        res.on('drain', settle).on('close', settle);
      }),
  };
}

export function fsRoutes(deps: RouteDeps): Route[] {
  const { config, metrics, guard, watches, spoolDir } = deps;
  const c = config.fs;
  const text = doc.limitsText(c);
  const readBytes = (n: number): void => metrics.fsBytes.inc({ direction: 'read' }, n);
  const wroteBytes = (n: number): void => metrics.fsBytes.inc({ direction: 'write' }, n);

  /** A read of the path in `?path=` (GET, fs:read): the handler gets it checked. */
  const read = (name: string, facts: () => Omit<Facts, 'query'>, handler: (ctx: RequestContext, path: string) => Promise<Reply>): Route =>
    route({ method: 'GET', path: `${F}/${name}`, scope: 'fs:read', doc: () => described({ ...facts(), query: pathQuery() }), handler: (ctx) => handler(ctx, pathOf(ctx)) });

  /** A change named by a JSON body (PUT, fs:write): the body read, its `paths` checked, the change made, 204. */
  const change = <K extends string, T extends Record<K, string>>(
    name: string,
    facts: Omit<Facts, 'body' | 'responses'> & { body: () => ZodType<T>; paths: readonly K[] },
    apply: (body: T) => Promise<void>,
  ): Route => {
    const { paths, ...rest } = facts;
    return route({ method: 'PUT', path: `${F}/${name}`, scope: 'fs:write', doc: () => described({ ...rest, body: rest.body(), responses: done }), handler: async (ctx) => {
      const body = ctx.body as T;
      for (const field of paths) checkPathInput(body[field], field);
      await apply(body);
      return { status: 204 };
    } });
  };

  return [
    read(
      'read_file',
      () => ({
        summary: 'Read a file (streamed; a single Range honoured)',
        description:
          'Streams the file from disk (a final symlink is followed). `Range: bytes=a-b`, `a-` or `-n` gives 206 with Content-Range; ' +
          'several ranges, another unit or a malformed header give the whole file (200); a range starting past the end is 416 ' +
          'range_not_satisfiable with `Content-Range: bytes */<size>`. Headers: Content-Length, Accept-Ranges, Last-Modified. HEAD gives ' +
          'the headers only. A read error after the first byte cuts the response.',
        responses: { 200: binary('the file'), 206: binary('the range') },
        errors: [400, 409, 416],
      }),
      async (ctx, p) => {
        const file = await openForRead(guard, p);
        let range;
        try {
          range = parseRange(ctx.req.headers.range, file.stat.size);
        } catch (err) {
          await file.fh.close();
          throw err;
        }
        await sendFile(ctx.res, file, range, readBytes);
        return null;
      },
    ),
    route({
      method: 'PUT',
      path: `${F}/write_file`,
      scope: 'fs:write',
      doc: () => described({
        summary: 'Write a whole file from the raw body (atomic)',
        description: text.write,
        query: writeQuery(),
        body: { mediaType: 'application/octet-stream', schema: BINARY },
        responses: done,
        errors: [400, 409, 413, 507],
      }),
      handler: async (ctx) => {
        const p = pathOf(ctx);
        const mode = parseMode('mode', ctx.query.mode, 0o644);
        const declared = Number(ctx.req.headers['content-length'] ?? Number.NaN);
        if (declared > c.maxFileBytes) throw new PayloadTooLargeError('the request body', c.maxFileBytes, 'BROWSERD_FS_MAX_FILE_BYTES');
        const t = await resolveForWrite(guard, p);
        try {
          const bytes = await writeAtomic(t, ctx.req, mode, { maxBytes: c.maxFileBytes, what: 'the request body', setting: 'BROWSERD_FS_MAX_FILE_BYTES' }, wroteBytes);
          ctx.log.info({ event: 'fs_write', path: t.real, bytes }, 'file written');
        } finally {
          await t.release();
        }
        return { status: 204 };
      },
    }),
    read(
      'list_files',
      () => ({ summary: 'List a folder', description: text.list, responses: { 200: { description: 'the entries', schema: doc.listSchema() } }, errors: [400, 409, 413] }),
      async (_ctx, p) => ({ status: 200, body: await listDir(guard, p, c.maxListEntries) }),
    ),
    read(
      'file_info',
      () => ({
        summary: 'Facts of a file or folder',
        description: 'A final symlink is followed: the facts are of what it points to, `path` is that real path.',
        responses: { 200: { description: 'the facts', schema: doc.fileInfoSchema() } },
        errors: [400, 409],
      }),
      async (_ctx, p) => ({ status: 200, body: await fileInfo(guard, p) }),
    ),
    change(
      'create_directory',
      {
        summary: 'Create a folder and its missing parents (mkdir -p)',
        description: 'Every missing folder gets `mode` (default 755, umask not applied); an existing folder is success (its mode unchanged); an existing file is 409 already_exists.',
        body: doc.createDirectoryBody,
        paths: ['path'],
        errors: [409, 507],
      },
      (body) => createDirectory(guard, body.path, parseMode('mode', body.mode, 0o755)),
    ),
    change(
      'delete_file',
      { summary: 'Delete a file or a symlink', description: 'A symlink is removed itself, never what it points to. A folder is 409 is_a_directory.', body: doc.pathBody, paths: ['path'], errors: [409] },
      (body) => deleteFile(guard, body.path),
    ),
    change(
      'delete_directory',
      {
        summary: 'Delete a folder and everything in it (rm -r)',
        description:
          'Depth first, each folder entered through its own handle, no symlink followed (a symlink inside is removed itself). A tree that ' +
          'holds the state directory or a protected file is refused whole (403), before anything is deleted. A symlink or file at `path` is 409 not_a_directory.',
        body: doc.pathBody,
        paths: ['path'],
        errors: [409],
      },
      (body) => deleteDirectory(guard, body.path),
    ),
    change(
      'move',
      {
        summary: 'Move or rename a file or folder',
        description:
          'rename(2) semantics: dest_path is the new path itself (not a folder to move into), its folder must exist; a file replaces a ' +
          'file, a folder replaces an empty folder (else 409 directory_not_empty); a file onto a folder is 409 is_a_directory, a folder onto ' +
          'a file 409 not_a_directory; neither path\'s final symlink is followed (the link itself moves). A folder that holds the state ' +
          'directory or a protected file cannot be moved (403). Across file systems a regular file is copied (atomically) then removed; ' +
          'a folder or symlink there is 400.',
        body: doc.moveBody,
        paths: ['src_path', 'dest_path'],
        errors: [409, 507],
      },
      (body) => move(guard, body.src_path, body.dest_path),
    ),
    change(
      'set_file_permissions',
      {
        summary: 'chmod, and chown when owner or group is given',
        description: 'A final symlink is followed. Names are looked up in /etc/passwd and /etc/group; numbers are ids. The files API acts as the agent user: only an object that user owns (else 403 path_forbidden, inner_error permission_denied), its owner only to that user and its group only to one of its groups; a daemon without a separate agent user needs to be root to change an owner.',
        body: doc.permissionsBody,
        paths: ['path'],
        errors: [409],
      },
      async (body) => {
        const mode = parseMode('mode', body.mode, 0);
        await setPermissions(guard, body.path, mode, await parseOwner('owner', body.owner), await parseOwner('group', body.group));
      },
    ),
    route({
      method: 'POST',
      path: `${F}/upload`,
      scope: 'fs:write',
      doc: () => described({
        summary: 'Upload files (multipart), each to its own destination',
        description: text.upload,
        body: multipart({
          type: 'object',
          required: ['files'],
          properties: {
            files: {
              type: 'array',
              minItems: 1,
              maxItems: c.maxUploadFiles,
              items: { type: 'object', required: ['dest_path', 'file'], properties: { dest_path: { type: 'string' }, file: BINARY } },
            },
          },
        }),
        responses: done,
        errors: [409, 413, 507],
      }),
      handler: async (ctx) => {
        const files = await receiveFiles(ctx.req, { guard, spoolDir, limits: c });
        ctx.log.info({ event: 'fs_upload', files }, 'files uploaded');
        return { status: 204 };
      },
    }),
    route({
      method: 'POST',
      path: `${F}/upload_zip`,
      scope: 'fs:write',
      doc: () => described({
        summary: 'Upload a zip archive and unpack it into a folder',
        description: text.zip,
        body: multipart({ type: 'object', required: ['dest_path', 'zip_file'], properties: { dest_path: { type: 'string' }, zip_file: BINARY } }),
        responses: done,
        errors: [409, 413, 422, 507],
      }),
      handler: async (ctx) => {
        const r = await receiveZip(ctx.req, { guard, spoolDir, limits: c });
        ctx.log.info({ event: 'fs_upload_zip', entries: r.entries, bytes: r.bytes }, 'archive unpacked');
        return { status: 204 };
      },
    }),
    read(
      'download_dir_zip',
      () => ({ summary: 'A folder as a zip archive (streamed)', description: text.download, responses: { 200: binary('the archive', 'application/zip') }, errors: [400, 409, 413] }),
      async (ctx, p) => {
        const plan = await planZip(guard, p, c.maxZipEntries);
        const res = ctx.res;
        res.writeHead(200, { 'content-type': 'application/zip', 'content-disposition': `attachment; filename*=UTF-8''${encodeURIComponent(plan.name)}.zip` });
        if (ctx.req.method === 'HEAD') {
          res.end();
          return null;
        }
        try {
          const r = await writeZip(guard, plan, responseSink(res));
          res.end();
          ctx.log.info({ event: 'fs_zip', path: plan.real, files: r.files, bytes: r.bytes }, 'folder archived');
        } catch (err) {
          ctx.log.warn({ event: 'fs_zip_cut', path: plan.real, err }, 'the archive was cut off');
          res.destroy();
        }
        return null;
      },
    ),
    route({
      method: 'POST',
      path: `${F}/upload_zstd`,
      scope: 'fs:write',
      doc: () => described({
        summary: 'Upload a tar.zst archive and unpack it into a folder',
        description: text.zstd,
        body: multipart({ type: 'object', required: ['dest_path', 'archive_file'], properties: { dest_path: { type: 'string' }, archive_file: BINARY } }),
        responses: done,
        errors: [409, 413, 422, 507],
      }),
      handler: async (ctx) => {
        const r = await receiveZip(ctx.req, { guard, spoolDir, limits: c }, 'tar.zst');
        ctx.log.info({ event: 'fs_upload_zstd', entries: r.entries, bytes: r.bytes }, 'archive unpacked');
        return { status: 204 };
      },
    }),
    read(
      'download_dir_zstd',
      () => ({ summary: 'A folder as a tar.zst archive (streamed)', description: text.downloadZstd, responses: { 200: binary('the archive', 'application/zstd') }, errors: [400, 409, 413] }),
      async (ctx, p) => {
        const plan = await planZip(guard, p, c.maxZipEntries);
        const res = ctx.res;
        res.writeHead(200, { 'content-type': 'application/zstd', 'content-disposition': `attachment; filename*=UTF-8''${encodeURIComponent(plan.name)}.tar.zst` });
        if (ctx.req.method === 'HEAD') {
          res.end();
          return null;
        }
        const tar = tarSource(guard, plan);
        try {
          await pipeline(tar.source, zstdCompressor(), res);
          ctx.log.info({ event: 'fs_tar_zstd', path: plan.real, files: tar.files() }, 'folder archived');
        } catch (err) {
          ctx.log.warn({ event: 'fs_tar_zstd_cut', path: plan.real, err }, 'the archive was cut off');
          res.destroy();
        }
        return null;
      },
    ),
    route({
      method: 'POST',
      path: `${F}/watch`,
      scope: 'fs:read',
      doc: () => described({ summary: 'Watch a folder for changes', description: text.watch, body: doc.watchBody(), responses: { 200: { description: 'the watch', schema: doc.watchStarted() } }, errors: [409, 429] }),
      handler: async (ctx) => {
        const body = ctx.body;
        checkPathInput(body.path);
        const w = await watches.start(body.path, body.recursive ?? false);
        return { status: 200, body: { watch_id: w.id } };
      },
    }),
    route({
      method: 'GET',
      path: `${F}/watch/{watch_id}/events`,
      scope: 'fs:read',
      doc: () => ({ summary: 'The events of a folder watch (Server-Sent Events)', description: doc.EVENTS_TEXT, responses: { 200: { description: 'the event stream', mediaType: 'text/event-stream', schema: { type: 'string' } } } }),
      handler: async (ctx) => {
        const { watch, signal, detach } = watches.attach(ctx.params.watch_id);
        try {
          await streamWatch(ctx.res, watch, { signal: AbortSignal.any([signal, ctx.signal]), stallMs: config.http.sseStallMs, onDrop: () => metrics.sseDropped.inc({ stream: 'fs_watch' }) });
        } finally {
          detach();
        }
        return null;
      },
    }),
    route({ method: 'DELETE', path: `${F}/watch/{watch_id}`, scope: 'fs:read', doc: () => ({ summary: 'Stop a folder watch', description: 'Its inotify watches are removed and its event stream ends.', responses: done }), handler: async (ctx) => {
      watches.stop(ctx.params.watch_id);
      return { status: 204 };
    } }),
  ];
}
