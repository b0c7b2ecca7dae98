// 22. The agent's newest tools (issue 40). The first execution of a new named Playwright executor
// (its runner starts, connects playwright-core to the daemon's CDP endpoint and opens its tab), against
// raw playwright-core in this process doing the same from nothing: connectOverCDP to the daemon,
// a new page, page.evaluate. And one call of the warm REPL (a cell that evaluates `1 + 1` in the
// current tab over CDP), against page.evaluate in an already-connected playwright-core, interleaved.
import { chromium, type Browser } from 'playwright-core';
import { checkRunning } from '../../test/kit/cleanup.js';
import { TEST_TOKEN, type Daemon } from '../daemon.js';
import { median, percentile, progress, readyDaemon, samples, timed, type Bench, type Row } from '../lib.js';

const N_EXECUTOR = samples(5);
const N_REPL = samples(50, 5);

interface Answer {
  success: boolean;
  error?: string;
}

export async function benchTools(): Promise<Row[]> {
  let d: Daemon | null = null;
  try {
    checkRunning();
    d = await readyDaemon();
    const daemon = d;
    const wsUrl = `${daemon.url.replace(/^http/, 'ws')}/browsers/local/cdp`;
    const connect = (): Promise<Browser> => chromium.connectOverCDP(wsUrl, { headers: { authorization: `Bearer ${TEST_TOKEN}` }, isLocal: true, noDefaults: true });
    const call = async (path: string, json: unknown): Promise<void> => {
      const a = await daemon.call<Answer>(path, { method: 'POST', json });
      if (!a.success) throw new Error(`${path}: ${a.error}`);
    };

    // The first execution of a new executor, against a cold playwright-core: connect, a page, evaluate.
    const firstExec: number[] = [];
    const cold: number[] = [];
    // Kept open: over CDP, browser.close() would close Chromium; they end with the daemon.
    const browsers: Browser[] = [];
    for (let i = 0; i <= N_EXECUTOR; i++) {
      checkRunning();
      const exec = await timed(() => call('/browsers/local/playwright/execute', { executor: `bench-${i}`, code: 'return await page.evaluate(() => 1 + 1)' }));
      await daemon.call(`/browsers/local/playwright/executors/bench-${i}`, { method: 'DELETE' });
      const raw = await timed(async () => {
        const browser = await connect();
        browsers.push(browser);
        const context = browser.contexts()[0];
        if (context === undefined) throw new Error('no default context');
        const page = await context.newPage();
        const v = await page.evaluate(() => 1 + 1);
        await page.close();
        return v;
      });
      if (i === 0) continue; // the first of each warms the daemon's and this process's code
      firstExec.push(exec.ms);
      cold.push(raw.ms);
    }
    progress(`first execute of a new executor p50 ${median(firstExec).toFixed(0)} ms, cold playwright-core ${median(cold).toFixed(0)} ms`);

    // A warm REPL call against page.evaluate in a connected playwright-core.
    await call('/browsers/local/repl', { code: '1' }); // the worker starts
    const warm = browsers[0] ?? (await connect());
    const context = warm.contexts()[0];
    if (context === undefined) throw new Error('no default context');
    const page = context.pages()[0] ?? (await context.newPage());
    const repl: number[] = [];
    const direct: number[] = [];
    for (let i = 0; i <= N_REPL; i++) {
      const r = await timed(() => call('/browsers/local/repl', { code: "(await cdp('Runtime.evaluate', { expression: '1 + 1', returnByValue: true })).result.value" }));
      const p = await timed(() => page.evaluate(() => 1 + 1));
      if (i === 0) continue;
      repl.push(r.ms);
      direct.push(p.ms);
    }
    progress(`REPL call p50 ${median(repl).toFixed(1)} ms, page.evaluate ${median(direct).toFixed(1)} ms`);
    return [
      {
        name: '22. first execute of a new named executor, p50',
        unit: 'ms',
        browserd: median(firstExec),
        peer: median(cold),
        peerName: 'playwright-core in-process from nothing: connectOverCDP to the daemon, context.newPage(), page.evaluate',
        note: `the executor's runner starts (Node, playwright-core), connects, opens its tab; N=${N_EXECUTOR}, p95 ${percentile(firstExec, 95).toFixed(0)} / ${percentile(cold, 95).toFixed(0)} ms`,
      },
      {
        name: '22. a REPL call (Runtime.evaluate of 1 + 1 in the current tab), p50',
        unit: 'ms',
        browserd: median(repl),
        peer: median(direct),
        peerName: 'page.evaluate(() => 1 + 1) in an already-connected playwright-core',
        note: `HTTP, the worker's protocol, the acorn rewrite, one CDP command; N=${N_REPL} each, interleaved; p95 ${percentile(repl, 95).toFixed(1)} / ${percentile(direct, 95).toFixed(1)} ms`,
      },
    ];
  } finally {
    await d?.cleanup();
  }
}

export const toolsBench: Bench = { name: 'tools', what: '22. named executor first execute vs cold playwright-core; a REPL call vs page.evaluate', run: benchTools };
