// A CDP client never gets 503 only because a restart runs: the CDP proxy with real sockets and
// stand-in upstreams, when Chromium is replaced while the upstream handshake runs; and the
// supervisor's wait for a stopped browser whose restart is queued behind another operation.
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { rmSync } from 'node:fs';
import { after, test } from 'node:test';
import { WebSocketServer } from 'ws';
import { CdpProxy } from '../daemon/chromium/cdp-proxy.js';
import { profileDirOf } from '../daemon/chromium/profile.js';
import { RESTART_OP, Supervisor } from '../daemon/chromium/supervisor.js';
import type { DevToolsEndpoint } from '../daemon/chromium/types.js';
import { loadConfig } from '../daemon/core/config.js';
import { createLogger } from '../daemon/core/log.js';
import { createMetrics } from '../daemon/core/metrics.js';
import type { Identity } from '../daemon/http/auth.js';
import { cdpConnect } from './helpers/chromium.js';
import { fixtures, tempDir } from './helpers/daemon.js';

const log = createLogger('silent');
const dirs: string[] = [];
const closers: (() => void | Promise<void>)[] = [];
after(async () => {
  for (const c of closers.reverse()) await c();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** A stand-in for Chromium's DevTools: answers every call with `product`. */
async function fakeDevTools(product: string, onConnection: () => void = () => {}): Promise<DevToolsEndpoint & { connections: () => number }> {
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise<void>((resolve) => wss.once('listening', resolve));
  let connections = 0;
  wss.on('connection', (ws) => {
    connections++;
    onConnection();
    ws.on('message', (data) => {
      const { id } = JSON.parse(String(data)) as { id: number };
      ws.send(JSON.stringify({ id, result: { product } }));
    });
  });
  closers.push(() => new Promise<void>((resolve) => wss.close(() => resolve())));
  const port = (wss.address() as AddressInfo).port;
  return { browserWsUrl: `ws://127.0.0.1:${port}/devtools/browser/${product}`, port, pid: 0, connections: () => connections };
}

test('Chromium replaced while the upstream handshake runs: the client waits and gets the new browser, not 503', async () => {
  let current: number | null = 1;
  // The restart begins while the proxy's handshake with the old Chromium runs.
  const oldChromium = await fakeDevTools('old', () => (current = null));
  const newChromium = await fakeDevTools('new');
  let asked = 0;
  const proxy = new CdpProxy({
    log,
    maxMessageBytes: 1024 * 1024,
    waitEndpoint: async () => {
      asked++;
      if (asked === 1) return { ...oldChromium, pid: 1 };
      current = 2; // the new Chromium is ready
      return { ...newChromium, pid: 2 };
    },
    currentPid: () => current,
    notReadyReason: () => (current === null ? 'Chromium is restarting' : null),
  });
  closers.push(() => proxy.destroy());
  const server = http.createServer((_req, res) => res.end());
  server.on('upgrade', (req, socket, head) => {
    const identity: Identity = { keyId: 'test', scopes: new Set(['cdp']), project: null };
    proxy.handle({ req, socket, head, url: new URL(req.url ?? '/', 'http://x'), params: {}, query: {}, identity, reqId: 'req-1', log, refuse: (err) => socket.end(`HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\r\n${JSON.stringify({ code: (err as { code?: string }).code })}`) });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(() => new Promise<void>((resolve) => server.close(() => resolve())));

  const c = await cdpConnect(`ws://127.0.0.1:${(server.address() as AddressInfo).port}/browsers/local/cdp`, 'unused');
  assert.equal((await c.call<{ product: string }>('Browser.getVersion')).product, 'new');
  assert.equal(oldChromium.connections(), 1, 'the old Chromium was reached first (the race did happen)');
  assert.equal(asked, 2);
  c.ws.close();
  await c.closed;
});

test('a stopped browser with a restart queued behind another operation: waitReady waits for that restart and gives its outcome', async () => {
  const stateDir = tempDir();
  const policyDir = tempDir();
  dirs.push(stateDir, policyDir);
  const config = loadConfig({
    PATH: process.env.PATH,
    BROWSERD_STATE_DIR: stateDir,
    BROWSERD_POLICY_DIR: policyDir,
    BROWSERD_CHROMIUM: path.join(fixtures, 'chromium-crash.sh'),
    BROWSERD_CRASH_LOOP_MAX: '1',
  });
  const sup = new Supervisor({ config, log, metrics: createMetrics(), profileDir: profileDirOf(stateDir), onRunEnded: () => {} });
  let release = (): void => {};
  closers.push(() => {
    release(); // the lock's holder lets go however the test ends, so close() gets the lock
    return sup.close();
  });
  assert.equal(sup.status().state, 'stopped');
  await assert.rejects(sup.waitReady(30_000, { whileRestartQueued: true }), /not started/, 'nothing queued: at once');

  const held = sup.lock.run('extensions', () => new Promise<void>((resolve) => (release = resolve)));
  const restart = sup.lock.run(RESTART_OP, () => sup.restartLocked('request')).catch((err: unknown) => err);
  const waiting = sup.waitReady(30_000, { whileRestartQueued: true });
  let settled = false;
  waiting.then(
    () => (settled = true),
    () => (settled = true),
  );
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(settled, false, 'still waiting while the restart is queued');
  assert.equal(sup.status().state, 'stopped');
  // A caller holding the lock itself is not made to wait for what is queued behind it.
  await assert.rejects(sup.waitReady(30_000), /not started/);

  release();
  await held;
  // The queued restart runs the fixture, which crashes at once: its outcome is the answer.
  await assert.rejects(waiting, /crash loop.*simulated start-up crash/);
  assert.match(String(await restart), /simulated start-up crash/);
  assert.equal(sup.status().state, 'failed');
  await assert.rejects(sup.waitReady(30_000, { whileRestartQueued: true }), /Chromium failed/, 'failed and nothing queued: at once');
});
