// @long: one of the slowest files (10 s or more alone), started first by test/run.mjs.
// Profiles through the official SDK (@onkernel/sdk 0.84, `client.profiles`, `browsers.update`)
// against the real daemon and real Chromium: a loopback site's cookie and localStorage value saved
// to a profile, gone in a browser without it, back when it is loaded, kept across a daemon
// restart; the downloaded archive (no cache, no lock) loaded into a second daemon's browser.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { after, before, test } from 'node:test';
import puppeteer from 'puppeteer-core';
import { kernel } from '../helpers/fs.js';
import { waitBrowser } from '../kit/browser.js';
import { TEST_TOKEN, startDaemon, type Daemon } from '../kit/daemon.js';
import { startOrigin, type Origin } from '../kit/origin.js';

let origin: Origin;
let base: string;
const daemons: Daemon[] = [];

before(async () => {
  origin = await startOrigin((req, res) => {
    const set = new URL(req.url ?? '/', 'http://x').searchParams.get('set');
    res.writeHead(200, { 'content-type': 'text/html', ...(set !== null ? { 'set-cookie': `k=${set}; Max-Age=3600; Path=/` } : {}) }).end('<p>site</p>');
  });
  base = origin.url;
});
after(async () => {
  for (const d of daemons.reverse()) await d.cleanup();
  await origin.close();
});

async function daemon(stateDir?: string): Promise<Daemon> {
  const d = await startDaemon({ autostart: true, ...(stateDir !== undefined ? { stateDir } : {}) });
  daemons.push(d);
  await waitBrowser(d, (s) => s.state === 'ready', 'ready');
  return d;
}

/** Visits the site in a new tab: with `value`, the site sets the cookie and the page the localStorage item; returns both as the page sees them. */
async function visit(d: Daemon, value?: string): Promise<{ cookie: string; stored: string | null }> {
  const b = await puppeteer.connect({ browserURL: `${d.url}/browsers/local/cdp`, headers: { authorization: `Bearer ${TEST_TOKEN}` } });
  try {
    const page = await b.newPage();
    await page.goto(value === undefined ? `${base}/` : `${base}/?set=${value}`);
    if (value !== undefined) await page.evaluate(`localStorage.setItem('k', ${JSON.stringify(value)})`);
    const seen = (await page.evaluate(`({ cookie: document.cookie, stored: localStorage.getItem('k') })`)) as { cookie: string; stored: string | null };
    await page.close();
    return seen;
  } finally {
    await b.disconnect();
  }
}

test('SDK: save to a profile, a browser without it has nothing, loading it brings both back; save_changes round trip; a daemon restart changes nothing; the archive loads into another daemon', async () => {
  let d = await daemon();
  let k = kernel(d);
  const p = await k.profiles.create({ name: 'p' });
  assert.equal(p.name, 'p');
  await k.profiles.create({ name: 'empty' });
  await k.browsers.update('local', { profile: { name: 'p', save_changes: true } });
  assert.deepEqual(await visit(d, 'one'), { cookie: 'k=one', stored: 'one' });

  // Loading another profile saves p (its save_changes) and starts Chromium on an empty one.
  await k.browsers.update('local', { profile: { name: 'empty' } });
  assert.deepEqual(await visit(d), { cookie: '', stored: null }, 'a browser without the profile has neither');

  await k.browsers.update('local', { profile: { id: p.id, save_changes: true } });
  assert.deepEqual(await visit(d), { cookie: 'k=one', stored: 'one' }, 'loading the profile brings both back');
  assert.equal(((await k.browsers.retrieve('local')) as unknown as { profile?: { id: string } }).profile?.id, p.id);

  // A change after loading, then a graceful daemon stop (it saves) and a start on the same state dir.
  assert.deepEqual(await visit(d, 'two'), { cookie: 'k=two', stored: 'two' });
  assert.equal((await d.stop()).code, 0);
  d = await daemon(d.stateDir);
  k = kernel(d);
  assert.deepEqual(await visit(d), { cookie: 'k=two', stored: 'two' }, 'after a daemon restart the browser is on the profile as it was');
  assert.deepEqual((await k.profiles.list()).getPaginatedItems().map((x) => x.name), ['p', 'empty']);

  await k.browsers.update('local', { profile: { name: 'empty' } });
  assert.deepEqual(await visit(d), { cookie: '', stored: null });
  await k.browsers.update('local', { profile: { name: 'p' } });
  assert.deepEqual(await visit(d), { cookie: 'k=two', stored: 'two' }, 'the change made after loading was saved (save_changes round trip)');

  // The archive: a tar.zst GNU tar reads, without caches or locks.
  const archive = Buffer.from(await (await k.profiles.download('p')).arrayBuffer());
  const names = execFileSync('tar', ['--zstd', '-tf', '-'], { input: archive }).toString().split('\n').filter((n) => n !== '');
  assert.ok(names.some((n) => n.endsWith('/Cookies')), `the archive holds the cookie store: ${names.slice(0, 20).join(' ')}`);
  assert.ok(names.some((n) => n.includes('Local Storage/leveldb/')), 'the archive holds the localStorage LevelDB');
  const forbidden = names.filter((n) => /(^|[/])(Singleton\w+|LOCK|lockfile|DevToolsActivePort|Cache|Code Cache|GPUCache|ShaderCache|GrShaderCache|Crashpad|Crash Reports)([/]|$)/.test(n));
  assert.deepEqual(forbidden, [], 'no cache or lock file in the archive');

  // Another daemon: nothing at first; the uploaded archive brings both.
  const other = await daemon();
  assert.deepEqual(await visit(other), { cookie: '', stored: null });
  const res = await other.fetch('/profiles?name=imported', { method: 'POST', headers: { 'content-type': 'application/zstd' }, body: archive });
  assert.equal(res.status, 201, await res.clone().text());
  await kernel(other).browsers.update('local', { profile: { name: 'imported' } });
  assert.deepEqual(await visit(other), { cookie: 'k=two', stored: 'two' }, 'the archive loads into another daemon\'s browser');
});

test('concurrent profile PATCHes run one at a time, each answered once Chromium runs on its profile', async () => {
  const d = await daemon();
  const k = kernel(d);
  await k.profiles.create({ name: 'a' });
  await k.profiles.create({ name: 'b' });
  const from = d.logs.length;
  const [ra, rb] = await Promise.all([
    d.fetch('/browsers/local', { method: 'PATCH', json: { profile: { name: 'a' } } }),
    d.fetch('/browsers/local', { method: 'PATCH', json: { profile: { name: 'b' } } }),
  ]);
  assert.equal(ra.status, 200);
  assert.equal(rb.status, 200);
  const events = d.logs.slice(from).filter((l) => ['chromium_restart', 'chromium_ready', 'profile_loaded'].includes(String(l.event))).map((l) => String(l.event));
  assert.deepEqual(events, ['chromium_restart', 'chromium_ready', 'profile_loaded', 'chromium_restart', 'chromium_ready', 'profile_loaded'], 'one restart after the other');
  assert.ok(d.logs.slice(from).some((l) => l.event === 'browser_lock_wait' && l.op === 'profile'), 'the second waited for the lifecycle lock');
  const loaded = d.logs.slice(from).filter((l) => l.event === 'profile_loaded');
  const last = (await k.profiles.list()).getPaginatedItems().find((x) => x.id === loaded[1]?.profile_id);
  assert.equal(((await k.browsers.retrieve('local')) as unknown as { profile?: { name: string } }).profile?.name, last?.name, 'the browser is on the profile loaded last');
});
