// The routes of /profiles (the SDK's `profiles` resource) and the profile part of
// PATCH /browsers/{id}. A key with a project sees only its project's profiles (any other is 404 and
// lists leave them out); a key without a project sees every profile. Names are unique among the
// profiles a key sees; `{id_or_name}` is tried as an id, then as a name.
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { type Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import zlib from 'node:zlib';
import { z } from 'zod';
import { lazy } from '../core/lazy.js';
import { BadRequestError, ConflictError, LimitExceededError, NotFoundError, OperationFailedError, PayloadTooLargeError } from '../core/errors.js';
import { ArchiveError } from '../core/zip/unzip.js';
import type { Identity } from '../http/auth.js';
import { qInt, qString } from '../http/query.js';
import type { RequestContext, Route } from '../http/router.js';
import { routesIn } from '../http/route.js';
import { packProfile, profileStream, unpackProfile } from './archive.js';
import { PROFILE_LIMITS } from './limits.js';
import type { ProfileStore, StoredProfile } from './store.js';
import { findProfile } from './switch.js';

const route = routesIn('daemon/profiles/routes.ts');

const nameSchema = lazy(() => z.string({ error: 'must be a string' }).trim().min(1, 'must not be empty').max(255, 'must be at most 255 characters'));
const createSchema = lazy(() => z.strictObject({ name: nameSchema().optional().meta({ description: 'Unique among the profiles this key sees' }) }));
const updateSchema = lazy(() => z.strictObject({ name: nameSchema() }));
const profileSchema = lazy(() => z.object({
  id: z.string(),
  name: z.string().nullable(),
  created_at: z.string(),
  updated_at: z.string().optional(),
  last_used_at: z.string().optional(),
}));
const listQuery = lazy(() => z.strictObject({
  limit: qInt(`Page size, 1 to ${PROFILE_LIMITS.pageMax} (default ${PROFILE_LIMITS.pageDefault})`, 1, PROFILE_LIMITS.pageMax),
  offset: qInt('Matching profiles to skip, oldest first (default 0)', 0, 1_000_000_000),
  name: qString('Exact name', 255),
  query: qString('Case-insensitive substring of the name, or the whole id', 255),
}));
const createQuery = lazy(() => z.strictObject({ name: qString('The name of a profile created from an uploaded archive', 255) }));
const downloadQuery = lazy(() => z.strictObject({ format: z.enum(['tar.zst', 'tar']).optional().meta({ description: 'tar.zst (default) or tar' }) }));

export const profileRefSchema = lazy(() => z
  .strictObject({
    id: z.string().min(1).max(255).optional(),
    name: z.string().min(1).max(255).optional(),
    save_changes: z.boolean({ error: 'must be a boolean' }).optional(),
  })
  .refine((r) => (r.id === undefined) !== (r.name === undefined), { message: 'give exactly one of id and name' })
  .meta({ description: 'Restart Chromium on this profile (open tabs are lost); save_changes: save it back when the browser next stops' }));

function identityOf(ctx: RequestContext): Identity {
  if (ctx.identity === null) throw new Error('profile routes need an identity');
  return ctx.identity;
}

export function toPublic(p: StoredProfile): Record<string, unknown> {
  return {
    id: p.id,
    name: p.name ?? null,
    created_at: p.created_at,
    ...(p.updated_at !== undefined ? { updated_at: p.updated_at } : {}),
    ...(p.last_used_at !== undefined ? { last_used_at: p.last_used_at } : {}),
  };
}

export interface RouteDeps {
  store: ProfileStore;
  stateDir: string;
}

/** Counts the bytes of an upload against the limit. */
function byteLimit(max: number): Transform {
  let n = 0;
  return new Transform({
    transform(chunk: Buffer, _enc, cb) {
      n += chunk.length;
      if (n > max) cb(new PayloadTooLargeError('the uploaded profile archive', max));
      else cb(null, chunk);
    },
  });
}

export function profileRoutes(deps: RouteDeps): Route[] {
  const { store, stateDir } = deps;
  const find = (ctx: RequestContext): StoredProfile => findProfile(store, ctx.params.id_or_name as string, identityOf(ctx).project);

  /** Inserts `record` unless its name is taken or the project is full (checked in the store's queue). */
  const insert = (record: StoredProfile): Promise<StoredProfile> =>
    store.mutate((cur) => {
      const mine = cur.filter((p) => p.project === record.project);
      if (record.name !== undefined && mine.some((p) => p.name === record.name)) throw new ConflictError('already_exists', `a profile named ${JSON.stringify(record.name)} exists`);
      if (mine.length >= PROFILE_LIMITS.maxProfiles) throw new LimitExceededError(record.project === null ? 'profiles without a project' : `profiles of project ${record.project}`, PROFILE_LIMITS.maxProfiles);
      return { next: [...cur, record], result: record };
    });

  /** The uploaded tar.zst: unpacked into a staging folder with every check, packed again without what profiles leave out. */
  const fromUpload = async (ctx: RequestContext, record: StoredProfile): Promise<void> => {
    const upload = store.tempPath();
    const staging = path.join(stateDir, `.profile-staging-${randomUUID()}`);
    const packed = store.tempPath();
    try {
      await pipeline(ctx.req, byteLimit(PROFILE_LIMITS.maxUploadBytes), createWriteStream(upload, { flags: 'wx', mode: 0o600 }), { signal: ctx.signal });
      await mkdir(staging, { mode: 0o700 });
      try {
        await unpackProfile(upload, staging, { maxEntries: PROFILE_LIMITS.maxEntries, maxUnpackedBytes: PROFILE_LIMITS.maxUnpackedBytes, unpackedWhat: 'the unpacked profile' });
      } catch (err) {
        if (err instanceof ArchiveError) throw new OperationFailedError('archive_rejected', `the archive is refused: ${err.message}`, { code: err.causeCode, message: err.message });
        throw err;
      }
      await packProfile(staging, packed);
      await store.commitArchive(record.id, packed);
    } finally {
      await rm(upload, { force: true });
      await rm(packed, { force: true });
      await rm(staging, { recursive: true, force: true });
    }
  };

  return [
    route({
      method: 'POST',
      path: '/profiles',
      scope: 'profiles:write',
      doc: () => ({
        summary: 'Create a profile: empty (JSON body), or from an uploaded tar.zst archive (application/zstd or application/octet-stream body, ?name=)',
        body: createSchema(),
        bodyRequired: false,
        query: createQuery(),
        responses: { 201: { description: 'the profile', schema: profileSchema() } },
        errors: [409, 413, 422, 429],
      }),
      readsBody: true, // a JSON body or an archive upload
      handler: async (ctx) => {
        const type = (ctx.req.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
        const upload = type === 'application/zstd' || type === 'application/octet-stream';
        let name: string | undefined;
        if (upload) {
          const q = ctx.query.name as string | undefined;
          const parsed = q === undefined ? undefined : nameSchema().safeParse(q);
          if (parsed !== undefined && !parsed.success) throw BadRequestError.field('name', parsed.error.issues[0]?.message ?? 'is invalid');
          name = parsed?.data;
        } else {
          name = (await ctx.json(createSchema(), { optional: true })).name;
        }
        const identity = identityOf(ctx);
        const record: StoredProfile = { id: randomUUID(), ...(name !== undefined ? { name } : {}), project: identity.project, created_at: new Date().toISOString(), has_content: upload };
        if (name !== undefined && store.list().some((p) => p.project === record.project && p.name === name)) throw new ConflictError('already_exists', `a profile named ${JSON.stringify(name)} exists`);
        if (upload) await fromUpload(ctx, record);
        try {
          await insert(record);
        } catch (err) {
          if (upload) await store.removeArchive(record.id);
          throw err;
        }
        ctx.log.info({ event: 'profile_created', profile_id: record.id, from_archive: upload }, 'profile created');
        return { status: 201, body: toPublic(record), headers: { location: `/profiles/${record.id}` } };
      },
    }),
    route({
      method: 'GET',
      path: '/profiles',
      scope: 'profiles:read',
      doc: () => ({ summary: 'List the profiles this key may see, oldest first, one page', query: listQuery(), responses: { 200: { description: 'one page (headers x-has-more, x-next-offset)', schema: z.array(profileSchema()) } }, errors: [400] }),
      handler: async (ctx) => {
        const project = identityOf(ctx).project;
        const q = ctx.query;
        const needle = q.query?.trim().toLowerCase() ?? '';
        const matching = store
          .list()
          .filter((p) => project === null || p.project === project)
          .filter((p) => q.name === undefined || q.name === '' || p.name === q.name)
          .filter((p) => needle === '' || p.id === q.query?.trim() || (p.name ?? '').toLowerCase().includes(needle));
        const offset = q.offset ?? 0;
        const items = matching.slice(offset, offset + (q.limit ?? PROFILE_LIMITS.pageDefault));
        const hasMore = offset + items.length < matching.length;
        return { status: 200, body: items.map(toPublic), headers: { 'x-has-more': String(hasMore), 'x-next-offset': String(hasMore ? offset + items.length : 0) } };
      },
    }),
    route({
      method: 'GET',
      path: '/profiles/{id_or_name}',
      scope: 'profiles:read',
      doc: () => ({ summary: 'One profile', responses: { 200: { description: 'the profile', schema: profileSchema() } } }),
      handler: async (ctx) => ({ status: 200, body: toPublic(find(ctx)) }),
    }),
    route({
      method: 'PATCH',
      path: '/profiles/{id_or_name}',
      scope: 'profiles:write',
      doc: () => ({ summary: 'Rename a profile', body: updateSchema(), responses: { 200: { description: 'the profile', schema: profileSchema() } }, errors: [409] }),
      handler: async (ctx) => {
        const input = ctx.body;
        const p = find(ctx);
        await store.mutate((cur) => {
          if (cur.some((x) => x.id !== p.id && x.project === p.project && x.name === input.name)) throw new ConflictError('already_exists', `a profile named ${JSON.stringify(input.name)} exists`);
          return { next: cur.map((x) => (x.id === p.id ? { ...x, name: input.name, updated_at: new Date().toISOString() } : x)), result: undefined };
        });
        return { status: 200, body: toPublic(store.get(p.id) ?? p) };
      },
    }),
    route({
      method: 'DELETE',
      path: '/profiles/{id_or_name}',
      scope: 'profiles:write',
      doc: () => ({ summary: 'Delete a profile (the browser keeps running on its data if it is loaded; nothing is saved back then)', responses: { 204: { description: 'deleted' } } }),
      handler: async (ctx) => {
        const p = find(ctx);
        await store.mutate((cur, loaded) => ({ next: cur.filter((x) => x.id !== p.id), loaded: loaded?.id === p.id ? null : loaded, result: undefined }));
        await store.removeArchive(p.id);
        ctx.log.info({ event: 'profile_deleted', profile_id: p.id }, 'profile deleted');
        return { status: 204 };
      },
    }),
    route({
      method: 'GET',
      path: '/profiles/{id_or_name}/download',
      scope: 'profiles:read',
      doc: () => ({
        summary: "The profile's content as last saved: a tar.zst (or tar) of Chromium's user data without caches, locks and crash reports",
        query: downloadQuery(),
        responses: { 200: { description: 'the archive', mediaType: 'application/zstd' } },
      }),
      handler: async (ctx) => {
        const p = find(ctx);
        const tar = ctx.query.format === 'tar';
        let src: Readable;
        if (p.has_content) {
          src = createReadStream(store.archivePath(p.id));
          await new Promise<void>((resolve, reject) => {
            src.once('open', () => resolve());
            src.once('error', (err: NodeJS.ErrnoException) => reject(err.code === 'ENOENT' ? new NotFoundError(`profile ${p.id} was deleted`) : err));
          });
        } else {
          src = profileStream(path.join(stateDir, `.profile-empty-${randomUUID()}`));
        }
        const body = tar ? src.pipe(zlib.createZstdDecompress()) : src;
        const fileName = `${(p.name ?? p.id).replace(/[^A-Za-z0-9._-]/g, '_')}.${tar ? 'tar' : 'tar.zst'}`;
        ctx.res.writeHead(200, { 'content-type': tar ? 'application/x-tar' : 'application/zstd', 'content-disposition': `attachment; filename="${fileName}"` });
        await pipeline(body, ctx.res, { signal: ctx.signal }).catch(() => ctx.res.destroy());
        src.destroy();
        return null;
      },
    }),
  ];
}
