// 6. Proxy check through tinyproxy on loopback: POST /proxies/{id}/check (its default check URL
// set to a local origin) until the answer, vs `curl -x http://user:pass@127.0.0.1:PORT` making
// the same request (an http target in absolute-form through the proxy, as browserd asks it), spawn to exit.
import { execFile } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { promisify } from 'node:util';
import { startOrigin, startTinyproxy, type Origin, type Tinyproxy } from '../../test/helpers/proxies/servers.js';
import { checkRunning, onCleanup } from '../../test/kit/cleanup.js';
import { startDaemon, type Daemon } from '../daemon.js';
import { median, notInstalled, percentile, progress, skippedRow, timed, which, type Bench, type Row } from '../lib.js';

const N = 30;
const NAME = '6. proxy check via tinyproxy, p50';
const PEER = '`curl -x http://user:pass@127.0.0.1:PORT` (process spawn to exit)';
const run = promisify(execFile);

export async function benchProxyCheck(): Promise<Row[]> {
  const curl = which('curl');
  if (which('tinyproxy') === null) return [skippedRow(NAME, 'ms', PEER, notInstalled('tinyproxy'))];
  if (curl === null) return [skippedRow(NAME, 'ms', PEER, notInstalled('curl'))];

  let origin: Origin | null = null;
  let tiny: Tinyproxy | null = null;
  let d: Daemon | null = null;
  // Both closes may run twice (a signal's cleanup and the finally): each is harmless the second time.
  const close = async (): Promise<void> => {
    await tiny?.close();
    await origin?.close();
  };
  const unregister = onCleanup(close);
  try {
    origin = await startOrigin();
    checkRunning();
    tiny = await startTinyproxy({ user: 'bench', pass: 'benchpass', connectPorts: [origin.port] });
    checkRunning();
    const target = `http://127.0.0.1:${origin.port}/json`;
    d = await startDaemon({ env: { BROWSERD_PROXY_CHECK_URLS: target } });
    const { id } = await d.call<{ id: string }>(
      '/proxies',
      { method: 'POST', json: { type: 'custom', protocol: 'http', config: { host: '127.0.0.1', port: tiny.port, username: 'bench', password: 'benchpass' } } },
      201,
    );
    const daemon = d;
    const curlArgs = ['-sS', '-o', '/dev/null', '-w', '%{http_code} %{time_total}', '-x', `http://bench:benchpass@127.0.0.1:${tiny.port}`, target];

    const dMs: number[] = [];
    const cMs: number[] = [];
    const cOwn: number[] = [];
    for (let i = 0; i <= N; i++) {
      const r = await timed(() => daemon.call<{ status: string }>(`/proxies/${id}/check`, { method: 'POST' }));
      if (r.value.status !== 'available') throw new Error(`the check says ${r.value.status}`);
      const t0 = performance.now();
      const out = await run(curl, curlArgs, { timeout: 10_000 });
      const c = performance.now() - t0;
      const [code, total] = out.stdout.trim().split(' ');
      if (code !== '200') throw new Error(`curl got ${out.stdout}`);
      if (i === 0) continue; // warm-up
      dMs.push(r.ms);
      cMs.push(c);
      cOwn.push(Number(total) * 1000);
    }
    progress(`proxy check: browserd ${median(dMs).toFixed(1)} ms, curl ${median(cMs).toFixed(1)} ms`);
    const note = `N=${N} each, interleaved; browserd: an HTTP request to the daemon, the check through the proxy (absolute-form GET), the store write; p95 ${percentile(dMs, 95).toFixed(1)} ms`;
    return [
      { name: NAME, unit: 'ms', browserd: median(dMs), peer: median(cMs), peerName: PEER, note },
      {
        name: '6. proxy check vs the request alone, p50',
        unit: 'ms',
        browserd: median(dMs),
        peer: median(cOwn),
        peerName: "curl's own `time_total` of the same request (no process start): the limit",
        note: 'the same samples',
      },
    ];
  } finally {
    await d?.cleanup();
    await close();
    unregister();
  }
}

export const proxyBench: Bench = { name: 'proxy', what: '6. proxy check through tinyproxy vs curl -x', run: benchProxyCheck };
