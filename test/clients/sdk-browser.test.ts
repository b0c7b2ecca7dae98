// The official SDK (@onkernel/sdk) against the real daemon for the browser and its extensions, each
// answer checked at runtime against the type the SDK declares; and the SDK's own retries made
// safe: a stdin write answered 504 (bytes left queued) is not sent again, and an exec whose client
// times out runs once when the SDK sends an Idempotency-Key.
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import Kernel, { APIError } from '@onkernel/sdk';
import { z } from 'zod';
import { installedList } from '../helpers/extensions.js';
import { readOutput } from '../helpers/processes.js';
import { fixtureZip } from '../helpers/zip.js';
import { waitBrowser } from '../kit/browser.js';
import { agentScratchDirs } from '../kit/agent.js';
import { TEST_TOKEN, startDaemon, type Daemon } from '../kit/daemon.js';

/** The SDK with its Idempotency-Key header on (a protected option of the generated client). */
class KeyedKernel extends Kernel {
  constructor(opts: ConstructorParameters<typeof Kernel>[0]) {
    super(opts);
    this.idempotencyHeader = 'Idempotency-Key';
  }
}

/** BrowserRetrieveResponse of resources/browsers/browsers.d.ts: its required fields, with their types. */
const browserRetrieveResponse = z.looseObject({
  cdp_ws_url: z.string().regex(/^ws:\/\/.+\/browsers\/local\/cdp\?jwt=[\w-]+\.[\w-]+\.[\w-]+$/),
  created_at: z.string().refine((s) => !Number.isNaN(Date.parse(s))),
  headless: z.boolean(),
  session_id: z.literal('local'),
  stealth: z.boolean(),
  timeout_seconds: z.number(),
  webdriver_ws_url: z.string(),
  proxy_id: z.string().optional(),
});

const scratch = agentScratchDirs('browserd-sdk-'); // the API's processes (the agent user) write there
let d: Daemon;
let sdk: Kernel;

before(async () => {
  d = await startDaemon({ autostart: true, env: { BROWSERD_STDIN_TIMEOUT_MS: '300' } });
  sdk = new Kernel({ apiKey: TEST_TOKEN, baseURL: d.url });
  await waitBrowser(d, (s) => s.state === 'ready', 'ready');
});
after(() => d.cleanup());

test('browsers.retrieve: the SDK names, typed as declared', async () => {
  const b = await sdk.browsers.retrieve('local');
  browserRetrieveResponse.parse(b);
  assert.equal(b.cdp_ws_url.split('?')[0], `${d.url.replace('http', 'ws')}/browsers/local/cdp`);
  await assert.rejects(sdk.browsers.retrieve('other'), (err: unknown) => err instanceof APIError && err.status === 404);
});

test('browsers.loadExtensions: the SDK\'s multipart encoding, activated live', async () => {
  const zip = new File([fixtureZip('mv3-worker')], 'mv3-worker.zip', { type: 'application/zip' });
  // The SDK declares no body (APIPromise<void>); the contract's answer comes through all the same.
  const res = (await sdk.browsers.loadExtensions('local', { extensions: [{ name: 'sdk-worker', zip_file: zip }] })) as unknown as { extensions: { name: string; activation: string }[] };
  assert.deepEqual(res.extensions.map((e) => [e.name, e.activation]), [['sdk-worker', 'live']]);
  const listed = await installedList(d);
  assert.deepEqual(listed.map((e) => [e.name, e.activation]), [['sdk-worker', 'live']]);
});

test('a stdin write answered 504 (bytes queued) is not retried by the SDK: the child reads them once', async () => {
  // The child reads nothing until the test opens its gate (a state, not a time: a loaded machine may take a second to answer).
  const gate = path.join(scratch(), 'gate');
  const p = await sdk.browsers.process.spawn('local', { command: 'sh', args: ['-c', `while [ ! -e ${gate} ]; do sleep 0.05; done; wc -c`] });
  assert.ok(p.process_id);
  const data = Buffer.alloc(1024 * 1024, 7);
  await assert.rejects(sdk.browsers.process.stdin(p.process_id as string, { id: 'local', data_b64: data.toString('base64') }), (err: unknown) => {
    assert.ok(err instanceof APIError, String(err));
    assert.equal(err.status, 504);
    assert.equal(err.headers.get('x-should-retry'), 'false');
    return true;
  });
  writeFileSync(gate, '');
  // EOF after the queued bytes (this request may time out too: it stays queued, in order, like them).
  const close = await d.fetch(`/browsers/local/process/${p.process_id}/stdin`, { method: 'POST', json: { data_b64: '', close: true } });
  assert.ok(close.status === 200 || close.status === 504, String(close.status));
  const out = await readOutput(d, p.process_id as string);
  assert.equal(out.stdout.toString().trim(), String(data.length), 'every byte once: not 2 or 3 times');
});

test('an exec whose client times out runs once: the SDK retries with the same Idempotency-Key and gets the first answer', async () => {
  const file = path.join(scratch(), 'ran');
  const keyed = new KeyedKernel({ apiKey: TEST_TOKEN, baseURL: d.url, timeout: 800, maxRetries: 3 });
  const r = await keyed.browsers.process.exec('local', { command: 'sh', args: ['-c', `echo ran >> ${file}; sleep 1.2; echo done`] });
  assert.equal(Buffer.from(r.stdout_b64 ?? '', 'base64').toString(), 'done\n');
  assert.equal(r.exit_code, 0);
  assert.equal(readFileSync(file, 'utf8'), 'ran\n', 'the command ran once, though the client timed out and retried');
});
