// The upload API against one daemon with the real Chromium: every client encoding, the 400
// table, size limits (413), malicious and broken archives (4xx, nothing written outside the
// state dir, extension list and Chromium pid unchanged), all or nothing, id conflicts,
// concurrent uploads, ?wait=false (409 before the body), the upload limit (429) and scopes.
import assert from 'node:assert/strict';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { existsSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { expectError } from '../helpers/http.js';
import { chromiumExtensions, expectUploaded, indexed, installedList, multipartBody, rawUpload, upload, type Part } from '../helpers/extensions.js';
import { buildZip, fixtureZip, treeEntries, fixtureDir } from '../helpers/zip.js';
import { browser, waitBrowser } from '../kit/browser.js';
import { tempDir } from '../kit/cleanup.js';
import { keysFile, TEST_TOKEN, startDaemon, type Daemon } from '../kit/daemon.js';

const READER = 'reader-token-0123456789abcdef';
const policyDir = tempDir('browserd-ext-api-policy-');
const tag = randomBytes(4).toString('hex');
let d: Daemon;
let pid: number | null = null;

before(async () => {
  const keys = keysFile([
    { id: 'all', token: TEST_TOKEN, scopes: ['browser:read', 'extensions:write', 'cdp'] },
    { id: 'reader', token: READER, scopes: ['browser:read'] },
  ]);
  d = await startDaemon({
    autostart: true,
    token: null,
    bearer: TEST_TOKEN, // the "all" key
    env: {
      BROWSERD_KEYS_FILE: keys,
      BROWSERD_POLICY_DIR: policyDir,
      BROWSERD_EXTENSION_MAX_ITEMS: '6',
      BROWSERD_EXTENSION_MAX_ARCHIVE_BYTES: String(64 * 1024),
      BROWSERD_EXTENSION_MAX_REQUEST_BYTES: String(200 * 1024),
      BROWSERD_EXTENSION_MAX_UNPACKED_BYTES: String(256 * 1024),
      BROWSERD_EXTENSION_MAX_ENTRIES: '50',
      BROWSERD_EXTENSION_MAX_UPLOADS: '2',
      BROWSERD_TEST_HOOKS: 'hold-activation=held',
    },
  });
  pid = (await waitBrowser(d, (b) => b.state === 'ready')).chromium.pid;
  await expectUploaded(await upload(d, indexed([['base', fixtureZip('content-script')]])));
});
after(async () => {
  await d.cleanup();
  rmSync(policyDir, { recursive: true, force: true });
});

const names = async (): Promise<string[]> => (await installedList(d)).map((e) => e.name).sort();

/** The upload left no trace: same Chromium, same set, no staging leftovers. */
async function unchanged(expected: string[]): Promise<void> {
  assert.equal((await browser(d)).chromium.pid, pid, 'Chromium kept running as it was');
  assert.deepEqual(await names(), expected);
  const ext = path.join(d.agentDir, 'extensions');
  assert.deepEqual(readdirSync(path.join(ext, 'staging')), [], 'no staging leftovers');
  assert.deepEqual(readdirSync(path.join(ext, 'installed')).sort(), expected);
}

describe('encodings', () => {
  const zip = fixtureZip('content-script');
  const cases: [string, (n: string) => Part[]][] = [
    ['Go: extensions.name + extensions.zip_file', (n) => [['extensions.name', n], ['extensions.zip_file', zip]]],
    ['Go, archive first', (n) => [['extensions.zip_file', zip], ['extensions.name', n]]],
    ['TypeScript/Python: extensions[][name] + extensions[][zip_file]', (n) => [['extensions[][name]', n], ['extensions[][zip_file]', zip]]],
    ['TypeScript/Python, archive first', (n) => [['extensions[][zip_file]', zip], ['extensions[][name]', n]]],
    ['indexed extensions[N][name]', (n) => [['extensions[0][name]', n], ['extensions[0][zip_file]', zip]]],
    ['indexed extensions[N].name, archive first', (n) => [['extensions[0].zip_file', zip], ['extensions[0].name', n]]],
  ];
  for (const [i, [title, parts]] of cases.entries()) {
    test(title, async () => {
      const name = `enc-${i}`;
      const body = await expectUploaded(await upload(d, parts(name)));
      assert.deepEqual(body.extensions.map((e) => [e.name, e.activation]), [[name, 'live']]);
      assert.equal(body.chromium.pid, pid);
    });
  }
  test('an archive made with `bsdtar -C dir .`: entries start with ./', async () => {
    const dotted = buildZip([{ name: './' }, ...treeEntries(fixtureDir('content-script'), './')]);
    const body = await expectUploaded(await upload(d, indexed([['dotted', dotted]])));
    assert.deepEqual(body.extensions.map((e) => [e.name, e.version, e.activation]), [['dotted', '2.1', 'live']]);
    assert.equal((await d.fetch('/browsers/local/extensions/dotted', { method: 'DELETE' })).status, 204);
  });
  test('two items in one request, repeated pairs matched k-th to k-th', async () => {
    const other = fixtureZip('mv3-worker');
    const body = await expectUploaded(
      await upload(d, [
        ['extensions[][name]', 'pair-a'],
        ['extensions[][name]', 'pair-b'],
        ['extensions[][zip_file]', zip],
        ['extensions[][zip_file]', other],
      ]),
    );
    assert.deepEqual(body.extensions.map((e) => [e.name, e.version]), [['pair-a', '2.1'], ['pair-b', '1.0.0']]);
    for (const n of ['pair-a', 'pair-b', ...cases.map((_, i) => `enc-${i}`)]) {
      const res = await d.fetch(`/browsers/local/extensions/${n}`, { method: 'DELETE' });
      assert.equal(res.status, 204);
    }
    await unchanged(['base']);
  });
});

describe('400: one detail per problem', () => {
  const zip = fixtureZip('content-script');
  const table: [string, Part[], RegExp][] = [
    ['duplicate name', indexed([['dup', zip], ['dup', zip]]), /^extensions\[1\]\.name: "dup" is already used by extensions\[0\]/],
    ['bad name', indexed([['bad/name', zip]]), /^extensions\[0\]\.name: "bad\/name" must match/],
    ['a name without its archive', [['extensions[0][name]', 'alone']], /^extensions\[0\]\.zip_file: is missing/],
    ['an archive without its name', [['extensions[0][zip_file]', zip]], /^extensions\[0\]\.name: is missing/],
    ['an empty list', [], /^extensions: the list is empty/],
    ['too many items', indexed(Array.from({ length: 7 }, (_, i): [string, Buffer] => [`many-${i}`, zip])), /^extensions: more parts than 6 items allow/],
  ];
  for (const [title, parts, detail] of table) {
    test(title, async () => {
      const body = await expectError(await upload(d, parts), 400, 'bad_request');
      const details = body.details as { code: string; message: string }[];
      assert.equal(details.length, 1, JSON.stringify(details));
      assert.equal(details[0]?.code, 'invalid_input');
      assert.match(details[0]?.message ?? '', detail);
    });
  }
  test('not multipart, or unparsable multipart: 400 invalid_request', async () => {
    await expectError(await d.fetch('/browsers/local/extensions', { method: 'POST', json: { extensions: [] } }), 400, 'invalid_request');
    await expectError(
      await d.fetch('/browsers/local/extensions', { method: 'POST', headers: { 'content-type': 'multipart/form-data; boundary=xyz' }, body: '--xyz\r\nContent-Disposition: form-data; name="extensions[0][name]"\r\n\r\nabc' }),
      400,
      'invalid_request',
    );
    await expectError(await d.fetch('/browsers/local/extensions?wait=maybe', { method: 'POST', body: new FormData() }), 400, 'bad_request');
    await unchanged(['base']);
  });
});

describe('413: size limits', () => {
  test('an archive over BROWSERD_EXTENSION_MAX_ARCHIVE_BYTES', async () => {
    const big = buildZip([...treeEntries(fixtureDir('content-script')), { name: 'noise.bin', data: randomBytes(70 * 1024), method: 'store' }]);
    for (const chunked of [false, true]) {
      const body = await expectError(await rawUpload(d, indexed([['big', big]]), { chunked }), 413, 'payload_too_large');
      assert.match(String(body.message), /archive of extensions\[0\]\[zip_file\] is over its limit of 65536 bytes/);
    }
    await unchanged(['base']);
  });
  test('a request over BROWSERD_EXTENSION_MAX_REQUEST_BYTES, declared or counted', async () => {
    const LIMIT = 200 * 1024;
    const archive = (noise: number): Buffer => buildZip([...treeEntries(fixtureDir('content-script')), { name: 'noise.bin', data: randomBytes(noise), method: 'store' }]);
    // Four archives under the archive limit, the last one sized so that the body is just over the request limit.
    const first = Array.from({ length: 3 }, (_, i): [string, Buffer] => [`req-${i}`, archive(60 * 1024)]);
    const base = multipartBody(indexed([...first, ['req-3', archive(0)]])).body.length;
    const items = [...first, ['req-3', archive(LIMIT + 512 - base)] as [string, Buffer]];
    assert.equal(multipartBody(indexed(items)).body.length, LIMIT + 512);
    for (const opts of [{ headersOnly: true }, { chunked: true }]) {
      const body = await expectError(await rawUpload(d, indexed(items), opts), 413, 'payload_too_large');
      assert.match(String(body.message), /request body is over its limit of 204800 bytes/);
    }
    await unchanged(['base']);
  });
  test('a zip bomb over BROWSERD_EXTENSION_MAX_UNPACKED_BYTES', async () => {
    const bomb = buildZip([...treeEntries(fixtureDir('content-script')), { name: 'bomb.bin', data: Buffer.alloc(1024 * 1024), method: 'deflate' }]);
    assert.ok(bomb.length < 8 * 1024);
    const body = await expectError(await upload(d, indexed([['bomb', bomb]])), 413, 'payload_too_large');
    assert.match(String(body.message), /unpacked extension is over its limit of 262144 bytes/);
    await unchanged(['base']);
  });
});

describe('422: malicious and broken archives are rejected, nothing written outside the state dir', () => {
  const escape = `browserd-escape-${tag}`;
  const ok = treeEntries(fixtureDir('content-script'));
  const table: [string, Buffer, string, RegExp][] = [
    ['zip slip with ..', buildZip([...ok, { name: `${'../'.repeat(12)}${tmpdir().slice(1)}/${escape}-dots.txt`, data: 'pwned' }]), 'zip_slip', /has a "\.\." segment/],
    ['zip slip to the state dir parent', buildZip([...ok, { name: `../../../../${escape}-parent.txt`, data: 'pwned' }]), 'zip_slip', /"\.\." segment/],
    ['absolute path', buildZip([...ok, { name: path.join(tmpdir(), `${escape}-abs.txt`), data: 'pwned' }]), 'zip_slip', /absolute path/],
    ['backslash', buildZip([...ok, { name: `..\\..\\${escape}-bs.txt`, data: 'pwned' }]), 'bad_entry_name', /backslash/],
    ['symlink', buildZip([...ok, { name: 'passwd', data: '/etc/passwd', mode: 0o120777 }]), 'symlink', /symbolic link/],
    ['device', buildZip([...ok, { name: 'dev', data: '', mode: 0o060644 }]), 'special_file', /device/],
    ['a bomb lying about its size', buildZip([...ok, { name: 'bomb.bin', data: Buffer.alloc(1024 * 1024), method: 'deflate', declaredSize: 1000 }]), 'size_mismatch', /declared size/],
    ['a declared size larger than the data', buildZip([...ok, { name: 'short.bin', data: 'x'.repeat(500), method: 'deflate', declaredSize: 50_000 }]), 'size_mismatch', /declared size/],
    ['too many entries', buildZip([...ok, ...Array.from({ length: 60 }, (_, i) => ({ name: `f/${i}.txt`, data: 'x' }))]), 'too_many_entries', /at most 50/],
    ['not a zip', Buffer.from('PK but not really a zip archive'), 'bad_zip', /not a valid zip/],
    ['manifest not JSON', fixtureZip('broken-not-json'), 'manifest_invalid', /manifest\.json: not JSON/],
    ['bad version', fixtureZip('broken-bad-version'), 'manifest_invalid', /manifest\.json: version: "1\.02\.x"/],
    ['missing worker file', fixtureZip('broken-missing-worker'), 'manifest_invalid', /manifest\.json: background\.service_worker: names "gone\.js"/],
    ['manifest_version 1', fixtureZip('broken-manifest-v1'), 'manifest_invalid', /manifest\.json: manifest_version: must be 2 or 3/],
    ['Manifest V2 (Chromium 156 loads none)', fixtureZip('manifest-v2'), 'manifest_invalid', /manifest_version: Manifest V2/],
    ['no manifest', buildZip([{ name: 'a/x.js', data: '' }, { name: 'b/y.js', data: '' }]), 'manifest_missing', /manifest\.json is missing/],
  ];
  for (const [title, zip, cause, message] of table) {
    test(title, async () => {
      const body = await expectError(await upload(d, indexed([['evil', zip]])), 422, 'extension_rejected');
      assert.deepEqual(Object.keys(body.inner_error as object).sort(), ['code', 'message']);
      assert.equal((body.inner_error as { code: string }).code, cause);
      assert.match((body.inner_error as { message: string }).message, message);
      const details = body.details as { code: string; message: string }[];
      assert.equal(details.length, 1);
      assert.equal(details[0]?.code, cause);
      assert.match(details[0]?.message ?? '', /^extensions\[0\] \(evil\): /);
      await unchanged(['base']);
      assert.ok(d.logs.some((l) => l.event === 'extension_rejected' && l.name === 'evil' && l.cause === cause));
    });
  }
  test('nothing escaped', () => {
    const leaks = [tmpdir(), path.dirname(d.stateDir), d.stateDir].flatMap((dir) => readdirSync(dir).filter((f) => f.startsWith(escape)));
    assert.deepEqual(leaks, []);
    assert.equal(existsSync(path.join(tmpdir(), `${escape}-abs.txt`)), false);
  });
  test('all or nothing: one bad item rejects the request, one detail per bad item', async () => {
    const good = fixtureZip('content-script');
    const body = await expectError(
      await upload(d, indexed([['good', good], ['bad-1', fixtureZip('broken-bad-version')], ['bad-2', buildZip([{ name: '/abs', data: 'x' }])]])),
      422,
      'extension_rejected',
    );
    assert.deepEqual((body.details as { code: string }[]).map((x) => x.code), ['manifest_invalid', 'zip_slip']);
    await unchanged(['base']);
  });
});

describe('ids', () => {
  // A manifest `key` fixes the id: the same key in two extensions gives them the same id.
  const key = generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).publicKey.export({ type: 'spki', format: 'der' }).toString('base64');
  test('an item with the id of an installed extension of another name: 422 id_conflict, the installed one still runs', async () => {
    const first = await expectUploaded(await upload(d, indexed([['keyed-a', fixtureZip('content-script', { manifest: { key } })]])));
    const id = first.extensions[0]?.id ?? '';
    assert.equal((await chromiumExtensions(d)).get(id), '2.1');
    const err = await expectError(await upload(d, indexed([['keyed-b', fixtureZip('mv3-worker', { manifest: { key } })]])), 422, 'extension_rejected');
    const inner = err.inner_error as { code: string; message: string };
    assert.equal(inner.code, 'id_conflict');
    assert.match(inner.message, new RegExp(`its id ${id} is the id of the installed extension keyed-a`));
    await unchanged(['base', 'keyed-a']);
    assert.equal((await chromiumExtensions(d)).get(id), '2.1', 'keyed-a was not replaced in Chromium');
    // The same name with the same key is a replacement, not a conflict.
    const again = await expectUploaded(await upload(d, indexed([['keyed-a', fixtureZip('content-script', { manifest: { key, version: '2.2' } })]])));
    assert.deepEqual(again.extensions.map((e) => [e.id, e.version]), [[id, '2.2']]);
    assert.equal((await d.fetch('/browsers/local/extensions/keyed-a', { method: 'DELETE' })).status, 204);
  });
  test('two items of one request with the same id: 422 id_conflict, nothing installed', async () => {
    const err = await expectError(
      await upload(d, indexed([['twin-a', fixtureZip('content-script', { manifest: { key } })], ['twin-b', fixtureZip('mv3-worker', { manifest: { key } })]])),
      422,
      'extension_rejected',
    );
    const details = err.details as { code: string; message: string }[];
    assert.deepEqual(details.map((x) => x.code), ['id_conflict']);
    assert.match(details[0]?.message ?? '', /^extensions\[1\] \(twin-b\): its id [a-p]{32} is also the id of extensions\[0\] \(twin-a\)/);
    await unchanged(['base']);
  });
});

describe('concurrency', () => {
  test('two uploads at once both land; ?wait=false meets 409 busy; past the upload limit 429', { timeout: 120_000 }, async () => {
    const release = path.join(d.stateDir, 'extensions', 'release-held');
    const held = upload(d, indexed([['held', fixtureZip('content-script')]]));
    await d.waitLog((l) => l.event === 'extension_activation_held');
    await expectError(await upload(d, indexed([['no-wait', fixtureZip('content-script')]]), '?wait=false'), 409, 'busy');
    // Answered before the body is read: the client sends only its headers.
    await expectError(await rawUpload(d, indexed([['no-wait', fixtureZip('content-script')]]), { query: '?wait=false', headersOnly: true }), 409, 'busy');
    const seen = d.logs.length;
    const queued = upload(d, indexed([['queued', fixtureZip('mv3-worker')]]));
    await d.waitLog((l) => l.event === 'browser_lock_wait' && d.logs.indexOf(l) >= seen);
    const third = await expectError(await rawUpload(d, indexed([['third', fixtureZip('content-script')]]), { headersOnly: true }), 429, 'limit_exceeded');
    assert.match(String(third.message), /extension uploads at once \(limit 2\)/);
    writeFileSync(release, '');
    const [a, b] = await Promise.all([held, queued]);
    assert.equal((await expectUploaded(a)).extensions[0]?.name, 'held');
    assert.equal((await expectUploaded(b)).extensions[0]?.name, 'queued');
    assert.deepEqual(await names(), ['base', 'held', 'queued']);
  });
});

describe('scopes', () => {
  test('listing needs browser:read, uploading and removing extensions:write', async () => {
    const as = { authorization: `Bearer ${READER}` };
    const res = await d.fetch('/browsers/local/extensions', { headers: as });
    assert.equal(res.status, 200);
    await res.text();
    const form = new FormData();
    const denied = await expectError(await d.fetch('/browsers/local/extensions', { method: 'POST', headers: as, body: form }), 403, 'forbidden');
    assert.deepEqual(denied.details, [{ code: 'missing_scope', message: 'extensions:write' }]);
    await expectError(await d.fetch('/browsers/local/extensions/base', { method: 'DELETE', headers: as }), 403, 'forbidden');
  });
});
