// The three extension routes and their OpenAPI facts.
import { rm } from 'node:fs/promises';
import { z } from 'zod';
import { lazy } from '../core/lazy.js';
import type { Config } from '../core/config.js';
import type { Logger } from '../core/log.js';
import type { Browser } from '../chromium/types.js';
import { NotFoundError } from '../core/errors.js';
import { Slots } from '../core/slots.js';
import { waitQuery } from '../http/query.js';
import type { Route } from '../http/router.js';
import { routesIn } from '../http/route.js';
import type { Installer } from './installer.js';
import { receiveUpload } from './intake/upload.js';
import { prepareItems } from './intake/prepare.js';
import { ACTIVATIONS, isValidName, NAME_RE, type Store } from './store.js';

const route = routesIn('daemon/extensions/routes.ts');

export interface RouteDeps {
  config: Config;
  browser: Browser;
  store: Store;
  installer: Installer;
  /** Whether this Chromium still loads Manifest V2 extensions. */
  allowManifestV2(): boolean;
  /** Removes an installed extension (under the lifecycle lock). */
  remove(name: string, log: Logger): Promise<void>;
}

const activation = lazy(() => z.enum(ACTIVATIONS).describe('live: Extensions.loadUnpacked; restart: applied at a Chromium restart; policy: force-installed through managed policy'));
const uploadResult = lazy(() => z.object({
  extensions: z.array(z.object({ name: z.string(), id: z.string().describe('Chromium extension id (32 letters a-p)'), version: z.string(), activation: activation() })),
  chromium: z.object({
    restarted: z.boolean(),
    pid: z.number().int().nullable(),
    ready_ms: z.number().int().describe('ms until DevTools was ready again after the restart; 0 when Chromium was not restarted'),
  }),
}));
const listed = lazy(() => z.object({ name: z.string(), id: z.string(), version: z.string(), activation: activation(), installed_at: z.string().describe('ISO time') }));
const listResult = lazy(() => z.object({ extensions: z.array(listed()) }));



export function extensionRoutes(deps: RouteDeps): Route[] {
  const { config, browser, store, installer } = deps;
  const lim = config.extensions;
  const uploads = new Slots({ what: 'extension uploads', max: lim.maxConcurrentUploads });

  const uploadDoc =
    'Installs or replaces extensions, all or nothing. The list `extensions` of items `{name, zip_file}` may be sent as repeated pairs ' +
    '`extensions.name` + `extensions.zip_file` (Go clients) or `extensions[][name]` + `extensions[][zip_file]` (TypeScript, Python clients), ' +
    'pairing the k-th name with the k-th archive, or indexed as `extensions[N][name]` / `extensions[N].name` with `extensions[N][zip_file]` / ' +
    '`extensions[N].zip_file`; a pair may come in either order. ' +
    `Limits: ${lim.maxItems} items (BROWSERD_EXTENSION_MAX_ITEMS), ${lim.maxArchiveBytes} bytes per archive (BROWSERD_EXTENSION_MAX_ARCHIVE_BYTES), ` +
    `${lim.maxRequestBytes} bytes per request (BROWSERD_EXTENSION_MAX_REQUEST_BYTES), ${lim.maxEntries} zip entries (BROWSERD_EXTENSION_MAX_ENTRIES) and ` +
    `${lim.maxUnpackedBytes} bytes unpacked (BROWSERD_EXTENSION_MAX_UNPACKED_BYTES) per archive, ${lim.maxConcurrentUploads} uploads at once ` +
    '(BROWSERD_EXTENSION_MAX_UPLOADS, 429 past it). ' +
    'Request problems (a name without its archive or the reverse, a bad or duplicate name, an empty list, too many items) are 400 bad_request with ' +
    'one detail each; an archive or unpacked tree over its limit is 413. An archive that is unsafe or not an extension is 422 extension_rejected, ' +
    'one detail per rejected item, inner_error the first cause: bad_zip, zip_slip (absolute path or ..), bad_entry_name (backslash, NUL, empty segment), ' +
    'duplicate_entry, symlink, special_file, encrypted, unsupported_compression, too_many_entries, size_mismatch (an entry larger or smaller than it ' +
    'declares), manifest_missing, manifest_invalid (names the file and field: JSON, manifest_version 3 (2 only where Chromium still loads it), name, ' +
    'version, background.service_worker and other referenced files, default_locale with _locales/<locale>/messages.json). ' +
    'Entries may start with ./ (archives made with bsdtar -C dir .). ' +
    'An item whose extension id (from the manifest\'s `key`) is another item\'s or an installed extension\'s under another name is ' +
    'rejected too (id_conflict), since Chromium would silently replace that one. ' +
    'Nothing is installed then and Chromium keeps running as it was. ' +
    'Activation: live (Extensions.loadUnpacked, verified with Extensions.getExtensions and the service worker target), policy (when managed policy ' +
    'forbids unpacked extensions or the manifest asks for webRequestBlocking: a CRX3 signed with a key kept per name, served on loopback, listed in ' +
    'ExtensionInstallForcelist of browserd-extensions.json in the policy directory, Chromium restarted with background networking allowed), restart ' +
    '(when live activation does not answer or cannot be verified within BROWSERD_EXTENSION_ACTIVATION_TIMEOUT_MS: one restart ' +
    'with the whole installed set, each verified). When a request needs a restart, all its items are activated by that restart. ' +
    'When Chromium refuses an item in live activation (Extensions.loadUnpacked answers with an error, e.g. an insecure content_security_policy), ' +
    'that is a rejection, not an activation failure: 422 extension_rejected, inner_error chromium_refused with Chromium\'s text; the items of ' +
    'the request loaded before it are taken out again (a replaced one back to its previous version), without a restart. ' +
    'A browser that is stopped (BROWSERD_BROWSER_AUTOSTART=false) or failed is not started by an upload: the extensions are checked, ' +
    'installed and kept, and apply at its next launch (POST /browsers/{id}/restart), which verifies nothing for them; the answer says ' +
    'activation restart (policy for policy installs) with chromium.restarted false and pid null. Replacing a policy install then is 503 ' +
    'browser_unavailable, since it takes two launches. ' +
    'A policy install that is replaced takes one more restart: it is taken out of the forcelist for one launch (Chromium uninstalls it, with ' +
    'its data) and comes back as the new version, since Chromium updates force-installed extensions only on its own schedule. ' +
    'The answer comes once DevTools is ready and every extension runs; an activation that fails is 422 activation_failed with the previous state ' +
    'restored (a replaced version back, Chromium relaunched with the previous set if it was restarted); 503 browser_unavailable, also with ' +
    'the previous state restored, when Chromium does not become ready (BROWSERD_READY_TIMEOUT_MS). ' +
    'With wait=false, 409 busy is answered before the body is read. A state directory whose path has a comma cannot hold extensions ' +
    '(Chromium\'s --load-extension separates paths with commas): every upload is then 422 activation_failed, inner_error state_dir_unusable.';

  return [
    route({
      method: 'POST',
      path: '/browsers/{id}/extensions',
      scope: 'extensions:write',
      doc: () => ({
        summary: 'Upload and activate extensions (multipart)',
        description: uploadDoc,
        query: waitQuery(),
        body: {
          mediaType: 'multipart/form-data',
          schema: {
            type: 'object',
            required: ['extensions'],
            properties: {
              extensions: {
                type: 'array',
                minItems: 1,
                maxItems: lim.maxItems,
                items: {
                  type: 'object',
                  required: ['name', 'zip_file'],
                  properties: {
                    name: { type: 'string', pattern: NAME_RE.source, description: 'the name the extension is installed under; an installed name is replaced' },
                    zip_file: { type: 'string', format: 'binary', description: 'zip of the unpacked extension: manifest.json at its root or in its single top folder' },
                  },
                },
              },
            },
          },
        },
        responses: { 200: { description: 'every extension is active and DevTools is ready', schema: uploadResult() } },
        errors: [400, 409, 413, 422, 429, 503],
      }),
      handler: async (ctx) => {
        const wait = ctx.query.wait !== false;
        installer.refuseIfUnusable();
        uploads.check();
        // wait=false: 409 busy before the body is read (up to BROWSERD_EXTENSION_MAX_REQUEST_BYTES);
        // taking the free lock for an instant is the check. It is checked again once the body is in.
        if (!wait) await browser.withLock('extensions', () => Promise.resolve(), { wait: false });
        const release = uploads.take();
        const staging = store.newStagingDir();
        try {
          const items = await receiveUpload(ctx.req, staging, lim);
          ctx.log.info({ event: 'extension_upload', names: items.map((i) => i.name) }, 'extension upload received');
          const prepared = await prepareItems(items, staging, { ...lim, allowManifestV2: deps.allowManifestV2() }, ctx.log);
          const result = await browser.withLock('extensions', () => installer.install(prepared, ctx.log), { wait, signal: ctx.signal });
          return { status: 200, body: result };
        } finally {
          release();
          await rm(staging, { recursive: true, force: true });
        }
      },
    }),
    route({
      method: 'GET',
      path: '/browsers/{id}/extensions',
      scope: 'browser:read',
      doc: () => ({ summary: 'The installed extensions', responses: { 200: { description: 'the installed set', schema: listResult() } } }),
      handler: async () => ({ status: 200, body: { extensions: installer.list() } }),
    }),
    route({
      method: 'DELETE',
      path: '/browsers/{id}/extensions/{name}',
      scope: 'extensions:write',
      doc: () => ({
        summary: 'Remove an installed extension',
        description:
          'Removes the extension from the installed set, then unloads it: an unpacked one with Extensions.uninstall (verified gone from ' +
          'Extensions.getExtensions and the targets; a Chromium restart when that is not clean), a policy one by rewriting the forcelist and ' +
          'restarting Chromium. The signing key of the name is kept, so a later upload under the same name gets the same policy id.',
        query: waitQuery(),
        responses: { 204: { description: 'removed' } },
        errors: [400, 409, 503],
      }),
      handler: async (ctx) => {
        const wait = ctx.query.wait !== false;
        const name = ctx.params.name;
        if (!isValidName(name) || !store.committed.has(name)) throw new NotFoundError(`no extension named ${name}`);
        await browser.withLock('extensions', () => deps.remove(name, ctx.log), { wait, signal: ctx.signal });
        return { status: 204 };
      },
    }),
  ];
}
