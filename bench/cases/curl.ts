// 15. A request through the browser: browserd's /curl (a hidden tab's navigation rewritten through
// the Fetch domain, docs/curl.md) against the same GET made over plain CDP on the same Chromium
// (Network.loadNetworkResource on the frame of a page already open, its stream read with IO.read:
// the least CDP work a fetch by the browser's network stack can take, but GET only).
// Both routes, each against the same peer samples (interleaved: browserd's /curl, /curl/raw, then the peer):
// - latency: a 1 KiB answer, one request at a time, p50.
// - throughput: an 8 MiB answer (/curl: base64 in JSON; /curl/raw: streamed; loadNetworkResource's stream), MB/s.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { CdpClient } from '../../daemon/cdp/client.js';
import { daemonCdp, waitBrowser } from '../../test/kit/browser.js';
import { startDaemon } from '../daemon.js';
import { median, progress, roundSpread, samples, type Bench, type Row } from '../lib.js';

const SMALL = Buffer.alloc(1024, 0x61);
const BIG = Buffer.alloc(8 * 1024 * 1024, 0x62);
const LATENCY_SAMPLES = samples(40, 4);
const BIG_SAMPLES = samples(6);
const WARM_UP = samples(5, 1);

async function viaCdp(cdp: CdpClient, sessionId: string, frameId: string, url: string): Promise<number> {
  const r = await cdp.send('Network.loadNetworkResource', { frameId, url, options: { disableCache: true, includeCredentials: true } }, { sessionId });
  if (!r.resource.success || r.resource.stream === undefined) throw new Error(`loadNetworkResource: ${r.resource.netErrorName ?? r.resource.httpStatusCode}`);
  let bytes = 0;
  for (;;) {
    const chunk = await cdp.send('IO.read', { handle: r.resource.stream, size: 1024 * 1024 }, { sessionId });
    bytes += Buffer.byteLength(chunk.data, chunk.base64Encoded === true ? 'base64' : 'utf8');
    if (chunk.eof) break;
  }
  await cdp.send('IO.close', { handle: r.resource.stream }, { sessionId });
  return bytes;
}

export const curlBench: Bench = {
  name: 'curl',
  what: 'a request through the browser: /curl and /curl/raw vs Network.loadNetworkResource over plain CDP',
  run: async (): Promise<Row[]> => {
    const origin = createServer((req, res) => {
      if (req.url === '/page') return void res.writeHead(200, { 'content-type': 'text/html' }).end('<title>page</title>');
      const body = req.url === '/big' ? BIG : SMALL;
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': body.length, 'cache-control': 'no-store' }).end(body);
    });
    await new Promise<void>((resolve) => origin.listen(0, '127.0.0.1', resolve));
    const base = `http://127.0.0.1:${(origin.address() as AddressInfo).port}`;
    const d = await startDaemon({ autostart: true });
    try {
      await waitBrowser(d, (s) => s.state === 'ready', 'ready');
      const cdp = await daemonCdp(d);
      const { targetId } = await cdp.send('Target.createTarget', { url: 'about:blank' });
      const { sessionId } = await cdp.send('Target.attachToTarget', { targetId, flatten: true });
      await cdp.send('Page.navigate', { url: `${base}/page` }, { sessionId });
      await cdp.send('Network.enable', {}, { sessionId });
      const frameId = (await cdp.send('Page.getFrameTree', {}, { sessionId })).frameTree.frame.id;
      const curl = async (path: string): Promise<number> => {
        const res = await d.fetch('/curl', { method: 'POST', json: { url: `${base}${path}`, response_encoding: 'base64' } });
        if (res.status !== 200) throw new Error(`/curl: ${res.status} ${await res.text()}`);
        return Buffer.from(((await res.json()) as { body: string }).body, 'base64').length;
      };
      const raw = async (path: string): Promise<number> => {
        const res = await d.fetch(`/curl/raw?url=${encodeURIComponent(`${base}${path}`)}`);
        if (res.status !== 200) throw new Error(`/curl/raw: ${res.status} ${await res.text()}`);
        return (await res.arrayBuffer()).byteLength;
      };
      const sample = async (fn: () => Promise<number>, want: number): Promise<number> => {
        const t0 = performance.now();
        const n = await fn();
        if (n !== want) throw new Error(`got ${n} bytes, not ${want}`);
        return performance.now() - t0;
      };
      for (let i = 0; i < WARM_UP; i++) {
        await curl('/small');
        await viaCdp(cdp, sessionId, frameId, `${base}/small`);
      }
      progress('curl: latency of a 1 KiB answer');
      const lat = { curl: [] as number[], raw: [] as number[], peer: [] as number[] };
      for (let i = 0; i < LATENCY_SAMPLES; i++) {
        lat.curl.push(await sample(() => curl('/small'), SMALL.length));
        lat.raw.push(await sample(() => raw('/small'), SMALL.length));
        lat.peer.push(await sample(() => viaCdp(cdp, sessionId, frameId, `${base}/small`), SMALL.length));
      }
      progress('curl: throughput of an 8 MiB answer');
      const mbps = { curl: [] as number[], raw: [] as number[], peer: [] as number[] };
      const rate = (ms: number): number => BIG.length / 1e6 / (ms / 1000);
      for (let i = 0; i < BIG_SAMPLES; i++) {
        mbps.curl.push(rate(await sample(() => curl('/big'), BIG.length)));
        mbps.raw.push(rate(await sample(() => raw('/big'), BIG.length)));
        mbps.peer.push(rate(await sample(() => viaCdp(cdp, sessionId, frameId, `${base}/big`), BIG.length)));
      }
      cdp.close();
      const peerName = 'Network.loadNetworkResource over plain CDP on an open page (GET only)';
      const ratio = (a: number[], b: number[]): string => (median(a) / median(b)).toFixed(2);
      return [
        { name: '15. /curl, 1 KiB answer, p50', unit: 'ms', browserd: median(lat.curl), peer: median(lat.peer), peerName, note: `${LATENCY_SAMPLES} each, interleaved with /curl/raw; ratio ${ratio(lat.curl, lat.peer)}×; ${roundSpread(lat.curl, lat.peer)}; a warm hidden tab per request (daemon/curl/tabs.ts); target ≤ 1.2× (issue 43)` },
        { name: '15. /curl/raw, 1 KiB answer, p50', unit: 'ms', browserd: median(lat.raw), peer: median(lat.peer), peerName, note: `the same peer samples; ratio ${ratio(lat.raw, lat.peer)}×; ${roundSpread(lat.raw, lat.peer)}` },
        { name: '15. /curl, 8 MiB answer, median', unit: 'MB/s', browserd: median(mbps.curl), peer: median(mbps.peer), peerName, higherIsBetter: true, note: `${BIG_SAMPLES} each, interleaved with /curl/raw; ratio ${ratio(mbps.curl, mbps.peer)}×; the body base64 in the JSON answer` },
        { name: '15. /curl/raw, 8 MiB answer, median', unit: 'MB/s', browserd: median(mbps.raw), peer: median(mbps.peer), peerName, higherIsBetter: true, note: `the same peer samples; ratio ${ratio(mbps.raw, mbps.peer)}×; streamed to the client` },
      ];
    } finally {
      await d.cleanup();
      await new Promise((resolve) => origin.close(resolve));
    }
  },
};
