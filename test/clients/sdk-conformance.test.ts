// @long: three daemons, each run twice through every resource of the SDK.
// The SDK's first minute as a new user meets it (issue 37): the official SDK, constructed with nothing
// but a key and the daemon's base URL, runs the same list of calls — every resource it has: browsers,
// computer, process, fs, playwright, logs, replays, telemetry, curl, fetch, profiles, proxies,
// extensions — in the SDK's three routing modes (KERNEL_BROWSER_ROUTING_SUBRESOURCES unset: its
// defaults curl and telemetry/stream go direct; empty: nothing goes direct; every subresource: all of
// them go to `{base_url}/{rest}?jwt=` once the SDK has read the record). Each mode gets a fresh daemon;
// each run's first call is a screenshot on a browser no CDP client has touched: on the fresh daemon,
// and again right after a restart. Every call must answer in every mode as it does through
// `/browsers/{id}/…` with a key (the empty mode), and the access log shows that each mode really
// routed its calls where the SDK says.
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import Kernel, { APIError } from '@onkernel/sdk';
import { decodePng } from '../helpers/png.js';
import { buildZip, fixtureZip } from '../helpers/zip.js';
import { agentScratchDirs } from '../kit/agent.js';
import { keysFile, startDaemon, TEST_TOKEN, type Daemon, type LogLine } from '../kit/daemon.js';
import { until } from '../kit/wait.js';

/** The SDK's key: every scope the daemon knows (what a control plane's own user would have). */
const SDK_KEY = 'sdk-conformance-key-0123456789';
const ALL_SCOPES = [
  'browser:read', 'browser:write', 'browser:configure', 'processes:exec', 'processes:write', 'extensions:write', 'proxies:read', 'proxies:write',
  'proxies:check', 'profiles:read', 'profiles:write', 'cdp', 'computer', 'playwright:execute', 'logs:read', 'fs:read', 'fs:write', 'replays:read',
  'replays:write', 'browser:fetch', 'telemetry:read', 'telemetry:write', 'live:view', 'live:control',
];
/** Every subresource of /browsers/{id}/… the SDK calls. */
const EVERY_SUBRESOURCE = ['computer', 'process', 'fs', 'playwright', 'logs', 'replays', 'telemetry', 'curl', 'extensions'];

interface Mode {
  name: 'unset' | 'empty' | 'every';
  /** The value of KERNEL_BROWSER_ROUTING_SUBRESOURCES while the SDK client is constructed (it reads it then). */
  env: string | undefined;
  /** The subresources whose calls go direct once the SDK has read the record. */
  direct: string[];
}
const MODES: Mode[] = [
  { name: 'empty', env: '', direct: [] },
  { name: 'unset', env: undefined, direct: ['curl', 'telemetry/stream'] },
  { name: 'every', env: EVERY_SUBRESOURCE.join(','), direct: EVERY_SUBRESOURCE },
];
const RUNS = ['fresh daemon', 'after restart'] as const;
type Run = (typeof RUNS)[number];

/** The SDK as a new user makes it: a key and the base URL, nothing else; the routing mode from the environment. */
function sdkFor(mode: Mode, baseURL: string): Kernel {
  const saved = process.env.KERNEL_BROWSER_ROUTING_SUBRESOURCES;
  if (mode.env === undefined) delete process.env.KERNEL_BROWSER_ROUTING_SUBRESOURCES;
  else process.env.KERNEL_BROWSER_ROUTING_SUBRESOURCES = mode.env;
  try {
    return new Kernel({ apiKey: SDK_KEY, baseURL });
  } finally {
    if (saved === undefined) delete process.env.KERNEL_BROWSER_ROUTING_SUBRESOURCES;
    else process.env.KERNEL_BROWSER_ROUTING_SUBRESOURCES = saved;
  }
}

// The target of curl and fetch: a loopback origin that sets a cookie.
const origin = http.createServer((req, res) => {
  if ((req.url ?? '').startsWith('/hello')) res.writeHead(200, { 'content-type': 'text/plain', 'set-cookie': 'conformance=1; Path=/' }).end('hello from the origin');
  else res.writeHead(404).end('no');
});
let originUrl = '';

const scratch = agentScratchDirs('browserd-sdk-conformance-');

interface Ctx {
  d: Daemon;
  k: Kernel;
  mode: Mode;
  run: Run;
  /** A folder of the agent user's, new for this run. */
  dir: string;
  /** A name unique to this mode and run. */
  tag: string;
}

/** What a call answered, reduced to what must be the same in every mode (no ids, times or pids). */
type Answer = unknown;

/** The status and code of an API error, so a refusal compares like an answer. */
async function outcome(p: Promise<Answer>): Promise<Answer> {
  try {
    return await p;
  } catch (err) {
    if (err instanceof APIError) return { error: err.status, code: (err.error as { code?: string } | undefined)?.code ?? null };
    throw err;
  }
}

async function screenshot(c: Ctx): Promise<Answer> {
  const res = await c.k.browsers.computer.captureScreenshot('local');
  const png = decodePng(Buffer.from(await res.arrayBuffer()));
  return { png: true, width: png.width, height: png.height };
}

async function readSse<T>(stream: AsyncIterable<T>, done: (e: T) => boolean, ms = 20_000): Promise<T[]> {
  const got: T[] = [];
  const timer = setTimeout(() => (stream as unknown as { controller?: AbortController }).controller?.abort(), ms);
  try {
    for await (const e of stream) {
      got.push(e);
      if (done(e)) break;
    }
  } finally {
    clearTimeout(timer);
  }
  return got;
}

interface Step {
  name: string;
  /** The subresource it calls under /browsers/{id}/ (null: a root resource of the SDK, or the record). */
  sub: string | null;
  call(c: Ctx): Promise<Answer>;
}

/** The list every mode runs, in order; the first call is a screenshot. */
const STEPS: Step[] = [
  { name: 'computer.captureScreenshot, the first call on an untouched browser', sub: 'computer', call: screenshot },
  {
    name: 'browsers.retrieve: the record fills the route cache',
    sub: null,
    async call(c) {
      const b = await c.k.browsers.retrieve('local');
      const route = c.k.browserRouteCache.get('local');
      assert.ok(route !== undefined, 'the route cache has the session');
      assert.equal(route.baseURL, c.d.url);
      return { session_id: b.session_id, base_url: b.base_url === c.d.url, jwt: route.jwt === (b as unknown as { jwt?: string }).jwt, live: b.browser_live_view_url?.startsWith(`${c.d.url}/browsers/local/live?jwt=`), headless: b.headless };
    },
  },
  { name: 'computer.captureScreenshot after retrieve (direct where the mode routes computer)', sub: 'computer', call: screenshot },
  {
    name: 'computer: mouse, keyboard, scroll, cursor, batch',
    sub: 'computer',
    async call(c) {
      const id = 'local';
      await c.k.browsers.computer.moveMouse(id, { x: 40, y: 30 });
      const pos = await c.k.browsers.computer.getMousePosition(id);
      await c.k.browsers.computer.clickMouse(id, { x: 50, y: 50 });
      await c.k.browsers.computer.dragMouse(id, { path: [[60, 60], [80, 80]] });
      await c.k.browsers.computer.scroll(id, { x: 100, y: 100, delta_y: 40 });
      await c.k.browsers.computer.typeText(id, { text: 'conformance' });
      await c.k.browsers.computer.pressKey(id, { keys: ['Tab'] });
      await c.k.browsers.computer.setCursorVisibility(id, { hidden: true });
      await c.k.browsers.computer.batch(id, { actions: [{ type: 'move_mouse', move_mouse: { x: 10, y: 12 } }, { type: 'click_mouse', click_mouse: { x: 10, y: 12 } }] });
      const after = await c.k.browsers.computer.getMousePosition(id);
      return { pos: [pos.x, pos.y], after: [after.x, after.y] };
    },
  },
  {
    name: 'browsers.update: the same record as retrieve',
    sub: null,
    async call(c) {
      const b = await c.k.browsers.update('local', {});
      const jwt = (b as unknown as { jwt?: string }).jwt;
      return { base_url: b.base_url === c.d.url, jwt: typeof jwt === 'string' && jwt.length > 0, live: typeof b.browser_live_view_url === 'string' };
    },
  },
  {
    name: 'process.exec',
    sub: 'process',
    async call(c) {
      const r = await c.k.browsers.process.exec('local', { command: 'sh', args: ['-c', 'echo out; echo err >&2; exit 3'] });
      return { exit_code: r.exit_code, stdout: Buffer.from(r.stdout_b64 ?? '', 'base64').toString(), stderr: Buffer.from(r.stderr_b64 ?? '', 'base64').toString() };
    },
  },
  {
    name: 'process.spawn, stdin, stdoutStream, status, kill, resize',
    sub: 'process',
    async call(c) {
      const p = await c.k.browsers.process.spawn('local', { command: 'cat' });
      const pid = p.process_id as string;
      const w = await c.k.browsers.process.stdin(pid, { id: 'local', data_b64: Buffer.from('piped\n').toString('base64'), close: true } as never);
      const events = await readSse(await c.k.browsers.process.stdoutStream(pid, { id: 'local' }), (e) => e.event === 'exit');
      const out = events.filter((e) => e.stream === 'stdout').map((e) => Buffer.from(e.data_b64 ?? '', 'base64').toString()).join('');
      const st = await until('cat has exited', async () => {
        const s = await c.k.browsers.process.status(pid, { id: 'local' });
        return s.state === 'exited' ? s : undefined;
      });
      const tty = await c.k.browsers.process.spawn('local', { command: 'sleep', args: ['30'], allocate_tty: true, cols: 80, rows: 24 });
      const tid = tty.process_id as string;
      await c.k.browsers.process.resize(tid, { id: 'local', cols: 100, rows: 30 });
      await c.k.browsers.process.kill(tid, { id: 'local', signal: 'KILL' });
      const killed = await until('sleep was killed', async () => {
        const s = await c.k.browsers.process.status(tid, { id: 'local' });
        return s.state === 'exited' ? s : undefined;
      });
      return { written: (w as { written_bytes?: number }).written_bytes, out, exit: events.at(-1)?.exit_code, status: [st.state, st.exit_code], killed: killed.state };
    },
  },
  {
    name: 'fs: directories, write, read, info, list, move, permissions, delete',
    sub: 'fs',
    async call(c) {
      const id = 'local';
      const dir = path.join(c.dir, 'tree');
      await c.k.browsers.fs.createDirectory(id, { path: dir });
      await c.k.browsers.fs.writeFile(id, 'file text', { path: path.join(dir, 'a.txt') });
      const text = await (await c.k.browsers.fs.readFile(id, { path: path.join(dir, 'a.txt') })).text();
      const info = await c.k.browsers.fs.fileInfo(id, { path: path.join(dir, 'a.txt') });
      await c.k.browsers.fs.move(id, { src_path: path.join(dir, 'a.txt'), dest_path: path.join(dir, 'b.txt') });
      await c.k.browsers.fs.setFilePermissions(id, { path: path.join(dir, 'b.txt'), mode: '0640' });
      const list = await c.k.browsers.fs.listFiles(id, { path: dir });
      const mode = (await c.k.browsers.fs.fileInfo(id, { path: path.join(dir, 'b.txt') })).mode;
      await c.k.browsers.fs.deleteFile(id, { path: path.join(dir, 'b.txt') });
      await c.k.browsers.fs.deleteDirectory(id, { path: dir });
      const gone = await outcome(c.k.browsers.fs.fileInfo(id, { path: dir }));
      return { text, size: info.size_bytes, is_dir: info.is_dir, list: list.map((f) => f.name), mode, gone };
    },
  },
  {
    name: 'fs: upload, upload_zip, download_dir_zip',
    sub: 'fs',
    async call(c) {
      const id = 'local';
      const dir = path.join(c.dir, 'up');
      await c.k.browsers.fs.upload(id, { files: [{ file: new File([Buffer.from('uploaded')], 'u.txt'), dest_path: path.join(dir, 'u.txt') }] });
      const zip = buildZip([{ name: 'z/inner.txt', data: Buffer.from('zipped') }]);
      await c.k.browsers.fs.uploadZip(id, { zip_file: new File([zip], 'z.zip', { type: 'application/zip' }), dest_path: path.join(dir, 'unz') });
      const back = Buffer.from(await (await c.k.browsers.fs.downloadDirZip(id, { path: dir })).arrayBuffer());
      const names = (await c.k.browsers.fs.listFiles(id, { path: dir })).map((f) => f.name).sort();
      return { names, zip: back.subarray(0, 2).toString() === 'PK', inner: await (await c.k.browsers.fs.readFile(id, { path: path.join(dir, 'unz', 'z', 'inner.txt') })).text() };
    },
  },
  {
    name: 'fs.watch: start, events, stop',
    sub: 'fs',
    async call(c) {
      const id = 'local';
      const dir = path.join(c.dir, 'watched');
      await c.k.browsers.fs.createDirectory(id, { path: dir });
      const w = await c.k.browsers.fs.watch.start(id, { path: dir, recursive: true });
      const stream = await c.k.browsers.fs.watch.events(w.watch_id as string, { id });
      await c.k.browsers.fs.writeFile(id, 'x', { path: path.join(dir, 'new.txt') });
      const seen = await readSse(stream, (e) => (e.name ?? e.path ?? '').includes('new.txt'));
      await c.k.browsers.fs.watch.stop(w.watch_id as string, { id });
      return { saw: seen.some((e) => (e.name ?? e.path ?? '').includes('new.txt')) };
    },
  },
  {
    name: 'playwright.execute',
    sub: 'playwright',
    async call(c) {
      // The page goes to the loopback origin: a secure context, which the clipboard needs (about:blank has none).
      const r = await c.k.browsers.playwright.execute('local', { code: `await page.goto(${JSON.stringify(`${originUrl}/hello`)}); return 6 * 7;` });
      return { success: r.success, result: r.result };
    },
  },
  {
    name: 'computer: clipboard (on an http page)',
    sub: 'computer',
    async call(c) {
      await c.k.browsers.computer.writeClipboard('local', { text: `clip-${c.tag}` });
      const clip = await c.k.browsers.computer.readClipboard('local');
      return { clipboard: clip.text === `clip-${c.tag}` };
    },
  },
  {
    name: 'logs.stream (follow=false)',
    sub: 'logs',
    async call(c) {
      const events = await readSse(await c.k.browsers.logs.stream('local', { source: 'supervisor', supervisor_process: 'browserd', follow: false }), () => false);
      return { some: events.length > 0, shape: Object.keys(events[0] ?? {}).sort() };
    },
  },
  {
    name: 'replays: start, list, stop, download',
    sub: 'replays',
    async call(c) {
      const r = await c.k.browsers.replays.start('local', { framerate: 5 });
      const listed = (await c.k.browsers.replays.list('local')).some((x) => x.replay_id === r.replay_id);
      await new Promise((resolve) => setTimeout(resolve, 1200)); // a second of video
      await c.k.browsers.replays.stop(r.replay_id, { id: 'local' });
      const mp4 = Buffer.from(await (await c.k.browsers.replays.download(r.replay_id, { id: 'local' })).arrayBuffer());
      return { listed, mp4: mp4.subarray(4, 8).toString() === 'ftyp' };
    },
  },
  {
    name: 'telemetry: events (paged), stream',
    sub: 'telemetry',
    async call(c) {
      const page = await c.k.browsers.telemetry.events('local', { limit: 5 });
      const stream = await c.k.browsers.telemetry.stream('local', { replay: 'all' } as never);
      const first = await readSse(stream, () => true);
      return { page: page.getPaginatedItems().length > 0, streamed: first.length === 1 && typeof first[0]?.seq === 'number' };
    },
  },
  {
    name: 'browsers.curl: through the browser, Set-Cookie included',
    sub: 'curl',
    async call(c) {
      const r = await c.k.browsers.curl('local', { url: `${originUrl}/hello` });
      const setCookie = Object.entries(r.headers).find(([h]) => h.toLowerCase() === 'set-cookie')?.[1];
      return { status: r.status, body: r.body, set_cookie: setCookie ?? null };
    },
  },
  {
    name: 'browsers.fetch',
    sub: 'curl',
    async call(c) {
      const res = await c.k.browsers.fetch('local', `${originUrl}/hello`);
      return { status: res.status, body: await res.text() };
    },
  },
  {
    name: 'browsers.loadExtensions',
    sub: 'extensions',
    async call(c) {
      const zip = new File([fixtureZip('mv3-worker')], 'ext.zip', { type: 'application/zip' });
      const res = (await c.k.browsers.loadExtensions('local', { extensions: [{ name: `conf-${c.tag}`, zip_file: zip }] })) as unknown as { extensions: { name: string }[] };
      return { names: res.extensions.map((e) => e.name === `conf-${c.tag}`) };
    },
  },
  {
    name: 'profiles: create, retrieve, list, delete',
    sub: null,
    async call(c) {
      const name = `conf-${c.tag}`;
      const p = await c.k.profiles.create({ name });
      const got = await c.k.profiles.retrieve(name);
      const listed = (await c.k.profiles.list()).getPaginatedItems().some((x) => x.id === p.id);
      await c.k.profiles.delete(p.id);
      const gone = await outcome(c.k.profiles.retrieve(name));
      return { name: got.name === name, listed, gone };
    },
  },
  {
    name: 'proxies: create, retrieve, update, list, check, delete',
    sub: null,
    async call(c) {
      const p = await c.k.proxies.create({ type: 'custom', name: `conf-${c.tag}`, config: { host: '127.0.0.1', port: 9 } });
      const got = await c.k.proxies.retrieve(p.id as string);
      const renamed = await c.k.proxies.update(p.id as string, { name: `conf-${c.tag}-2` });
      const listed = (await c.k.proxies.list()).getPaginatedItems().some((x) => x.id === p.id);
      const check = await outcome(c.k.proxies.check(p.id as string, { url: 'http://10.0.0.1/' }));
      await c.k.proxies.delete(p.id as string);
      const gone = await outcome(c.k.proxies.retrieve(p.id as string));
      return { type: got.type, renamed: renamed.name === `conf-${c.tag}-2`, listed, check, gone };
    },
  },
];

/** answers[mode][run][step] */
const answers = new Map<string, Map<Run, Map<string, Answer>>>();
/** The SDK's requests each mode's daemon logged: route and key. */
const requests = new Map<string, { route: string; key: string; status: number }[]>();

before(async () => {
  await new Promise<void>((resolve) => origin.listen(0, '127.0.0.1', resolve));
  originUrl = `http://127.0.0.1:${(origin.address() as AddressInfo).port}`;
});
after(async () => {
  origin.closeAllConnections();
  await new Promise((resolve) => origin.close(resolve));
});

/** Ready as /readyz says: nothing but HTTP, no CDP client. */
async function ready(d: Daemon): Promise<void> {
  await until('/readyz answers 200', async () => (await fetch(`${d.url}/readyz`)).status === 200, 90_000, 100);
}

for (const mode of MODES) {
  describe(`KERNEL_BROWSER_ROUTING_SUBRESOURCES ${mode.env === undefined ? 'unset' : JSON.stringify(mode.env)}`, () => {
    let d: Daemon;
    const byRun = new Map<Run, Map<string, Answer>>();
    answers.set(mode.name, byRun);
    before(async () => {
      d = await startDaemon({
        autostart: true,
        token: null,
        bearer: TEST_TOKEN,
        env: { BROWSERD_KEYS_FILE: keysFile([{ id: 'sdk', token: SDK_KEY, scopes: ALL_SCOPES }, { id: 'kit', token: TEST_TOKEN, scopes: ALL_SCOPES }]) },
      });
      await ready(d);
    });
    after(async () => {
      requests.set(
        mode.name,
        d.logs.filter((l: LogLine) => l.event === 'request' && (l.key_id === 'sdk' || l.key_id === 'jwt:self')).map((l) => ({ route: String(l.route), key: String(l.key_id), status: Number(l.status) })),
      );
      await d.cleanup();
    });

    for (const run of RUNS) {
      describe(run, () => {
        const got = new Map<string, Answer>();
        byRun.set(run, got);
        let c: Ctx;
        before(async () => {
          if (run === 'after restart') {
            const res = await d.fetch('/browsers/local/restart', { method: 'POST' });
            assert.equal(res.status, 200, await res.clone().text());
            await res.text();
            await ready(d);
          }
          c = { d, k: sdkFor(mode, d.url), mode, run, dir: scratch(), tag: `${mode.name}-${run === 'fresh daemon' ? 1 : 2}` };
        });
        for (const step of STEPS) {
          test(step.name, async () => {
            const answer = await step.call(c);
            got.set(step.name, answer);
          });
        }
      });
    }
  });
}

test('every call answers in every mode and run as it does through /browsers/{id}/… with a key (the empty mode on a fresh daemon)', () => {
  const reference = answers.get('empty')?.get('fresh daemon');
  assert.ok(reference !== undefined);
  const differ: string[] = [];
  for (const step of STEPS) {
    const want = reference.get(step.name);
    if (want === undefined) differ.push(`${step.name}: failed in the reference run`);
    for (const mode of MODES) {
      for (const run of RUNS) {
        const have = answers.get(mode.name)?.get(run)?.get(step.name);
        try {
          assert.deepStrictEqual(have, want);
        } catch {
          differ.push(`${mode.name} / ${run} / ${step.name}: ${JSON.stringify(have) ?? 'no answer (failed)'} vs ${JSON.stringify(want)}`);
        }
      }
    }
  }
  assert.deepEqual(differ, []);
});

test('each mode routed its calls where the SDK says: direct calls at the root with the record\'s token, the others under /browsers/{id}/ with the key', () => {
  const problems: string[] = [];
  const subOf = (route: string): string => route.replace(/^\/browsers\/\{id\}\//, '').replace(/^\//, '');
  const goesDirect = (mode: Mode, route: string): boolean => mode.direct.some((p) => subOf(route) === p || subOf(route).startsWith(`${p}/`));
  for (const mode of MODES) {
    const reqs = requests.get(mode.name) ?? [];
    assert.ok(reqs.length > 0, `${mode.name}: requests were logged`);
    for (const r of reqs) {
      if (r.route === 'unmatched') problems.push(`${mode.name}: a request matched no route (${r.key}, ${r.status})`);
      else if (r.key === 'jwt:self') {
        // browsers.fetch always goes direct to /curl/raw (the SDK has no other path for it).
        if (r.route.startsWith('/browsers/') || !(goesDirect(mode, r.route) || r.route === '/curl/raw')) problems.push(`${mode.name}: ${r.route} with the record's token`);
      } else if (r.route.startsWith('/browsers/{id}/') && goesDirect(mode, r.route)) {
        // Only the first screenshot of each run, before the SDK has read the record, may take the long way.
        if (r.route !== '/browsers/{id}/computer/screenshot') problems.push(`${mode.name}: ${r.route} with the key, not direct`);
      }
    }
    const viaKey = reqs.filter((r) => r.key === 'sdk' && r.route === '/browsers/{id}/computer/screenshot').length;
    if (mode.direct.includes('computer') && viaKey !== RUNS.length) problems.push(`${mode.name}: ${viaKey} screenshots with the key (one per run: the first call)`);
    const direct = reqs.filter((r) => r.key === 'jwt:self').map((r) => r.route);
    for (const sub of mode.direct) {
      const want = sub === 'telemetry' ? '/telemetry/stream' : `/${sub}`;
      if (!direct.some((route) => route === want || route.startsWith(`${want}/`))) problems.push(`${mode.name}: no direct call to ${want}`);
    }
  }
  assert.deepEqual(problems, []);
});
