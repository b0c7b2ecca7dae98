// Telemetry's cost on a page load: the same page (a document, 20 scripts each logging to the
// console, 20 fetches) loaded through Puppeteer over the daemon's CDP endpoint with the CDP
// categories off (the SDK's default) and on (console, network, page) with a reader on the stream,
// interleaved, one warm-up each, N samples each. Goal: under 5% slower.
import { readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import puppeteer from 'puppeteer-core';
import { TEST_TOKEN } from '../daemon.js';
import { median, percentile, progress, readyDaemon, roundSpread, samples, timed, type Bench, type Row } from '../lib.js';

const N = samples(20);
const PARTS = 20;

export async function benchTelemetry(): Promise<Row[]> {
  const origin = http.createServer((req, res) => {
    const url = req.url ?? '/';
    if (url.startsWith('/s/')) return void res.writeHead(200, { 'content-type': 'text/javascript' }).end(`console.log('script', ${JSON.stringify(url)}, {n: 1});`);
    if (url.startsWith('/api/')) return void res.writeHead(200, { 'content-type': 'application/json', 'set-cookie': 'sid=abc' }).end('{"ok":true}');
    const scripts = Array.from({ length: PARTS }, (_, i) => `<script src="/s/${i}.js"></script>`).join('');
    const fetches = `<script>window.done = Promise.all(Array.from({length: ${PARTS}}, (_, i) => fetch('/api/' + i).then((r) => r.json())));</script>`;
    res.writeHead(200, { 'content-type': 'text/html' }).end(`<title>bench</title>${scripts}${fetches}`);
  });
  await new Promise<void>((resolve) => origin.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(origin.address() as AddressInfo).port}`;
  const d = await readyDaemon();
  const reader = new AbortController();
  try {
    const headers = { authorization: `Bearer ${TEST_TOKEN}` };
    const b = await puppeteer.connect({ browserURL: `${d.url}/browsers/local/cdp`, headers });
    const page = await b.newPage();
    // A reader on the stream for the whole run: events are formatted and sent, as in use.
    const stream = await d.fetch('/telemetry/stream', { signal: reader.signal });
    void (async () => {
      try {
        for await (const chunk of stream.body as ReadableStream<Uint8Array>) void chunk;
      } catch {
        // aborted at the end
      }
    })();
    const on = { browser: { console: { enabled: true }, network: { enabled: true }, page: { enabled: true } } };
    const off: number[] = [];
    const withTelemetry: number[] = [];
    const cpu: Record<string, number[]> = { on: [], off: [] };
    const cpuMs = (): number => {
      const stat = readFileSync(`/proc/${d.pid}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      return ((Number(f[11]) + Number(f[12])) * 1000) / 100;
    };
    const load = async (): Promise<number> => {
      const r = await timed(async () => {
        await page.goto(`${base}/?${Math.random()}`, { waitUntil: 'load' });
        await page.evaluate("window.done");
      });
      return r.ms;
    };
    for (let i = 0; i <= N; i++) {
      for (const mode of i % 2 === 0 ? ['off', 'on'] : ['on', 'off']) {
        await d.call('/telemetry', { method: 'PUT', json: mode === 'on' ? on : {} });
        const c0 = cpuMs();
        const ms = await load();
        if (i > 0) {
          (mode === 'on' ? withTelemetry : off).push(ms);
          cpu[mode]?.push(cpuMs() - c0);
        }
      }
      if (i > 0) progress(`telemetry ${i}/${N}: on ${withTelemetry.at(-1)?.toFixed(0)} ms, off ${off.at(-1)?.toFixed(0)} ms`);
    }
    await b.disconnect();
    progress(`telemetry: the daemon's CPU per load p50 ${median(cpu.on ?? []).toFixed(1)} ms on vs ${median(cpu.off ?? []).toFixed(1)} ms off`);
    return [
      {
        name: '19. page load with telemetry on (console, network, page; a stream reader), p50',
        unit: 'ms',
        browserd: median(withTelemetry),
        peer: median(off),
        peerName: 'the same load with the CDP categories off (the default)',
        note: `the daemon's CPU per load p50 ${median(cpu.on ?? []).toFixed(0)} ms on vs ${median(cpu.off ?? []).toFixed(0)} ms off; a document, ${PARTS} scripts logging, ${PARTS} fetches; N=${N} each, interleaved; ${roundSpread(withTelemetry, off)}; p95 ${percentile(withTelemetry, 95).toFixed(0)} vs ${percentile(off, 95).toFixed(0)} ms; goal: under 5% slower`,
      },
    ];
  } finally {
    reader.abort();
    await d.cleanup();
    await new Promise<void>((resolve) => origin.close(() => resolve()));
  }
}

export const telemetryBench: Bench = { name: 'telemetry', what: '19. page load, telemetry on vs off', run: benchTelemetry };
