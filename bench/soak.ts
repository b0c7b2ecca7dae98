// `node dist/bench/soak.js [minutes]` (default 20): the daemon under mixed load for that long (issue 38:
// "memory grows under mixed load"): four clients loop over a mix of requests (browser state, exec,
// file write and read, screenshot, /curl through the daemon, telemetry pages, a short telemetry and
// log stream, /metrics, refused requests), against a local origin. Every 30 s it samples the daemon's
// RSS (/proc) and V8's heapUsed (the daemon's own /metrics: browserd_nodejs_heap_size_used_bytes), and prints
// one JSON line per sample, then a summary: the samples after warm-up (the first quarter), and
// whether the last third's median is within 10% of the second third's (a plateau). Not part of
// `npm run bench` (it takes 20 minutes); the numbers of a run are in bench/ANALYSIS.md.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { rssOf } from '../test/kit/procs.js';
import { interrupt, runCleanups } from '../test/kit/cleanup.js';
import { startDaemon, type Daemon } from './daemon.js';

const MiB = 1024 * 1024;
const SAMPLE_MS = 30_000;
const CLIENTS = 4;

interface Sample {
  t_s: number;
  requests: number;
  rss_mib: number;
  heap_used_mib: number;
}

async function heapUsed(d: Daemon): Promise<number> {
  const text = await (await d.fetch('/metrics')).text();
  const m = /^browserd_nodejs_heap_size_used_bytes (\d+(?:\.\d+)?(?:e\+\d+)?)$/m.exec(text);
  return m === null ? NaN : Number(m[1]) / MiB;
}

async function drain(res: Response): Promise<void> {
  await res.arrayBuffer().catch(() => undefined);
}

/** One short stream: open it, read its first chunk, let go. */
async function shortStream(d: Daemon, path: string): Promise<void> {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), 500);
  try {
    const res = await d.fetch(path, { signal: ac.signal });
    const reader = res.body?.getReader();
    await reader?.read().catch(() => undefined);
    ac.abort();
  } catch {
    // aborted: the point
  } finally {
    clearTimeout(timer);
  }
}

async function main(): Promise<number> {
  const minutes = Number(process.argv[2] ?? 20);
  const origin = http.createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'text/html', 'set-cookie': 'a=b' }).end(`<title>${req.url}</title><p>${'x'.repeat(4096)}</p>`);
  });
  await new Promise<void>((resolve) => origin.listen(0, '127.0.0.1', resolve));
  const site = `http://127.0.0.1:${(origin.address() as AddressInfo).port}`;
  const d = await startDaemon({ autostart: true });
  let requests = 0;
  let failures = 0;
  const steps: ((i: number) => Promise<void>)[] = [
    async () => drain(await d.fetch('/browsers/local')),
    async () => drain(await d.fetch('/browsers/local/process/exec', { method: 'POST', json: { command: 'echo', args: ['soak'] } })),
    async (i) => {
      const file = `/tmp/browserd-soak-${i % 8}.txt`;
      await drain(await d.fetch(`/browsers/local/fs/write_file?path=${encodeURIComponent(file)}`, { method: 'PUT', body: 'y'.repeat(16 * 1024), headers: { 'content-type': 'application/octet-stream' } }));
      await drain(await d.fetch(`/browsers/local/fs/read_file?path=${encodeURIComponent(file)}`));
    },
    async () => drain(await d.fetch('/browsers/local/computer/screenshot', { method: 'POST' })),
    async (i) => drain(await d.fetch('/curl', { method: 'POST', json: { url: `${site}/page-${i}?token=secret-${i}` } })),
    async () => drain(await d.fetch('/browsers/local/telemetry/events?limit=100')),
    async () => shortStream(d, '/browsers/local/telemetry/stream'),
    async () => shortStream(d, '/browsers/local/logs/stream?source=daemon'),
    async () => drain(await d.fetch('/metrics')),
    async () => drain(await d.fetch('/browsers/local/process/exec', { method: 'POST', json: { command: 'true', bogus: 1 } })), // 400
    async () => drain(await d.fetch('/browsers/nope/fs/list_files?path=/tmp')), // 404
  ];
  const t0 = Date.now();
  const end = t0 + minutes * 60_000;
  const client = async (c: number): Promise<void> => {
    for (let i = c; Date.now() < end; i += CLIENTS) {
      try {
        await (steps[i % steps.length] as (i: number) => Promise<void>)(i);
      } catch {
        failures++;
      }
      requests++;
    }
  };
  const samples: Sample[] = [];
  const sample = async (): Promise<void> => {
    const s = { t_s: Math.round((Date.now() - t0) / 1000), requests, rss_mib: Math.round((rssOf(d.pid) / MiB) * 10) / 10, heap_used_mib: Math.round((await heapUsed(d)) * 10) / 10 };
    samples.push(s);
    process.stdout.write(`${JSON.stringify(s)}\n`);
  };
  await sample();
  const sampler = setInterval(() => void sample().catch(() => undefined), SAMPLE_MS);
  await Promise.all(Array.from({ length: CLIENTS }, (_, c) => client(c)));
  clearInterval(sampler);
  await sample();
  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
  const third = Math.max(1, Math.floor(samples.length / 3));
  const mid = samples.slice(third, 2 * third);
  const last = samples.slice(2 * third);
  const summary = {
    minutes,
    requests,
    failures,
    rss_mib: { first: samples[0]?.rss_mib, middle_third_median: median(mid.map((s) => s.rss_mib)), last_third_median: median(last.map((s) => s.rss_mib)), max: Math.max(...samples.map((s) => s.rss_mib)) },
    heap_used_mib: { first: samples[0]?.heap_used_mib, middle_third_median: median(mid.map((s) => s.heap_used_mib)), last_third_median: median(last.map((s) => s.heap_used_mib)), max: Math.max(...samples.map((s) => s.heap_used_mib)) },
  };
  const plateau = (m: { middle_third_median: number; last_third_median: number }): boolean => m.last_third_median <= m.middle_third_median * 1.1;
  process.stdout.write(`${JSON.stringify({ summary, rss_plateau: plateau(summary.rss_mib), heap_plateau: plateau(summary.heap_used_mib) })}\n`);
  await d.cleanup();
  await new Promise<void>((resolve) => origin.close(() => resolve()));
  return 0;
}

process.on('SIGINT', interrupt);
void main()
  .catch((err: unknown) => {
    process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
    return 1;
  })
  .then(async (code) => {
    await runCleanups();
    process.exit(code);
  });
