// 8. Playwright execution. `return 1` through POST /browsers/local/playwright/execute (the runner
// is persistent: HTTP, the runner's protocol, a compiled-code cache hit, the answer), against what
// the work costs without a persistent runner: a fresh node process per call that connects
// playwright-core over CDP to the same daemon and runs the same code. And `page.goto` of a loopback
// page through execute, against the same script in a playwright-core that is already connected
// (connectOverCDP to the daemon's endpoint, the same page), interleaved: the goal is ≤ 1.2×.
import { execFile } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import { chromium } from 'playwright-core';
import { checkRunning, onCleanup } from '../../test/kit/cleanup.js';
import { repoRoot } from '../../test/kit/daemon.js';
import { TEST_TOKEN, type Daemon } from '../daemon.js';
import { median, percentile, progress, readyDaemon, timed, type Bench, type Row } from '../lib.js';

const N_RETURN = 200;
const N_FRESH = 5;
const N_GOTO = 30;
const run = promisify(execFile);

interface Answer {
  success: boolean;
  result?: unknown;
  error?: string;
}

export async function benchPlaywright(): Promise<Row[]> {
  const site = createServer((req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end(`<!doctype html><title>bench ${req.url}</title><p>hello</p>`));
  await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
  const closeSite = (): Promise<void> => new Promise((resolve) => site.close(() => resolve()));
  const unregister = onCleanup(closeSite);
  const siteUrl = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
  let d: Daemon | null = null;
  try {
    checkRunning();
    d = await readyDaemon();
    const daemon = d;
    const execute = async (code: string): Promise<Answer> => {
      const a = await daemon.call<Answer>('/browsers/local/playwright/execute', { method: 'POST', json: { code } });
      if (!a.success) throw new Error(`execute failed: ${a.error}`);
      return a;
    };
    for (let i = 0; i < 5; i++) await execute('return 1'); // the runner starts, connects, compiles

    const ret: number[] = [];
    for (let i = 0; i < N_RETURN; i++) ret.push((await timed(() => execute('return 1'))).ms);

    // The peer of `return 1`: a fresh process per call, as without a persistent runner.
    const wsUrl = `${daemon.url.replace(/^http/, 'ws')}/browsers/local/cdp`;
    const script = `const { chromium } = require(${JSON.stringify(path.join(repoRoot, 'node_modules', 'playwright-core'))});
      (async () => {
        const browser = await chromium.connectOverCDP(${JSON.stringify(wsUrl)}, { headers: { authorization: 'Bearer ${TEST_TOKEN}' }, isLocal: true, noDefaults: true });
        const context = browser.contexts()[0];
        const page = context.pages()[0] ?? await context.newPage();
        const result = await (async () => { return 1; })(page, context, browser);
        process.stdout.write(JSON.stringify({ success: true, result }));
        process.exit(0);
      })();`;
    const fresh: number[] = [];
    for (let i = 0; i <= N_FRESH; i++) {
      checkRunning();
      const r = await timed(() => run(process.execPath, ['-e', script], { timeout: 60_000 }));
      if (!r.value.stdout.includes('"result":1')) throw new Error(`fresh process: ${r.value.stdout} ${r.value.stderr}`);
      if (i > 0) fresh.push(r.ms);
    }
    progress(`return 1: browserd p50 ${median(ret).toFixed(1)} ms, fresh process ${median(fresh).toFixed(0)} ms`);

    // page.goto: through execute vs an already-connected playwright-core on the same page.
    const browser = await chromium.connectOverCDP(wsUrl, { headers: { authorization: `Bearer ${TEST_TOKEN}` }, isLocal: true, noDefaults: true });
    // Never browser.close(): over CDP that closes Chromium (the daemon restarts it); the connection
    // ends with the daemon, stopped below.
    const gotoExec: number[] = [];
    const gotoDirect: number[] = [];
    const context = browser.contexts()[0];
    if (context === undefined) throw new Error('no default context');
    const page = context.pages()[0] ?? (await context.newPage());
    for (let i = 0; i <= N_GOTO; i++) {
      const url = `${siteUrl}/n${i}`;
      const viaExec = await timed(() => execute(`await page.goto(${JSON.stringify(`${url}-exec`)}); return page.url()`));
      const direct = await timed(async () => {
        await page.goto(`${url}-direct`);
        return page.url();
      });
      if (i === 0) continue;
      gotoExec.push(viaExec.ms);
      gotoDirect.push(direct.ms);
    }
    progress(`page.goto: execute p50 ${median(gotoExec).toFixed(1)} ms, connected playwright-core ${median(gotoDirect).toFixed(1)} ms`);
    const ratio = median(gotoExec) / median(gotoDirect);
    return [
      {
        name: '10. playwright execute `return 1`, p50',
        unit: 'ms',
        browserd: median(ret),
        peer: median(fresh),
        peerName: 'a fresh node process per call: playwright-core connectOverCDP to the daemon, then the code',
        note: `goal ≤ 15 ms; N=${N_RETURN}, p95 ${percentile(ret, 95).toFixed(1)} ms; the peer N=${N_FRESH}`,
      },
      {
        name: '10. page.goto of a loopback page, p50',
        unit: 'ms',
        browserd: median(gotoExec),
        peer: median(gotoDirect),
        peerName: 'the same goto in an already-connected playwright-core (connectOverCDP to the daemon, the same page)',
        note: `goal ≤ 1.2×: ${ratio.toFixed(2)}×; N=${N_GOTO} each, interleaved; p95 ${percentile(gotoExec, 95).toFixed(1)} / ${percentile(gotoDirect, 95).toFixed(1)} ms`,
      },
    ];
  } finally {
    await d?.cleanup();
    await closeSite();
    unregister();
  }
}

export const playwrightBench: Bench = { name: 'playwright', what: '10. Playwright execute: `return 1`, and page.goto vs an already-connected playwright-core', run: benchPlaywright };
