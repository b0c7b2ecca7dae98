// Shared parts of the files API tests: the SDK client, curl as a second real client, big files,
// the daemon's memory while it streams, and a Server-Sent Events reader.
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { closeSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Kernel from '@onkernel/sdk';
import { TEST_TOKEN, type Daemon } from '../kit/daemon.js';
import { rssOf } from '../kit/procs.js';

export const MiB = 1024 * 1024;

/** The official SDK against this daemon (no retries: every answer is the daemon's first). */
export function kernel(d: Daemon, token = TEST_TOKEN): Kernel {
  return new Kernel({ apiKey: token, baseURL: d.url, maxRetries: 0 });
}

export interface CurlResult {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

let curlCalls = 0;

/** curl against the daemon: `args` are curl's own (method, data, -F …); the URL is the daemon's plus `route`. */
export function curl(d: Daemon, route: string, args: string[] = [], token: string | null = TEST_TOKEN): Promise<CurlResult> {
  const headerFile = path.join(tmpdir(), `browserd-curl-${process.pid}-${curlCalls++}.txt`);
  const auth = token === null ? [] : ['-H', `Authorization: Bearer ${token}`];
  const all = ['-sS', '-D', headerFile, '-o', '-', ...auth, ...args, `${d.url}${route}`];
  return new Promise((resolve, reject) => {
    execFile('curl', all, { encoding: 'buffer', maxBuffer: 256 * MiB }, (err, stdout, stderr) => {
      let raw = '';
      try {
        raw = readFileSync(headerFile, 'latin1');
      } catch {
        // no answer at all
      }
      rmSync(headerFile, { force: true });
      if (err) return reject(new Error(`curl failed (${String(err.code)}): ${stderr.toString()}`));
      // With 100-continue there are several header blocks: the last is the answer.
      const blocks = raw.split(/\r\n\r\n/).filter((b) => /^HTTP\//.test(b));
      const [statusLine, ...lines] = (blocks.at(-1) ?? '').split('\r\n');
      const headers: Record<string, string> = {};
      for (const l of lines) {
        const i = l.indexOf(':');
        if (i > 0) headers[l.slice(0, i).toLowerCase()] = l.slice(i + 1).trim();
      }
      resolve({ status: Number(statusLine?.split(' ')[1]), headers, body: stdout });
    });
  });
}

export function json(r: CurlResult): Record<string, unknown> {
  return JSON.parse(r.body.toString('utf8')) as Record<string, unknown>;
}

/** A file of `bytes` made of one random MiB repeated (fast to write); returns its sha256. */
export function bigFile(file: string, bytes: number): string {
  const block = randomBytes(MiB);
  const hash = createHash('sha256');
  const fd = openSync(file, 'w');
  try {
    for (let done = 0; done < bytes; done += MiB) {
      const chunk = block.subarray(0, Math.min(MiB, bytes - done));
      writeSync(fd, chunk);
      hash.update(chunk);
    }
  } finally {
    closeSync(fd);
  }
  return hash.digest('hex');
}

export function sha256(data: Buffer | string): string {
  return createHash('sha256').update(data).digest('hex');
}

/** The highest VmRSS of `pid` seen (every 10 ms) while `work` runs, with work's result. */
export async function peakRss<T>(pid: number, work: Promise<T>): Promise<{ peak: number; value: T }> {
  let peak = rssOf(pid);
  const timer = setInterval(() => (peak = Math.max(peak, rssOf(pid))), 10);
  try {
    const value = await work;
    return { peak: Math.max(peak, rssOf(pid)), value };
  } finally {
    clearInterval(timer);
  }
}

export interface SseEvent {
  event: string;
  data: string;
}

/** The events of an SSE response, as they arrive (comments skipped). */
export async function* sseEvents(res: Response): AsyncGenerator<SseEvent> {
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  let buf = '';
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return;
    buf += decoder.decode(value, { stream: true });
    let i: number;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      let event = 'message';
      const data: string[] = [];
      for (const line of block.split('\n')) {
        if (line.startsWith(':')) continue;
        if (line.startsWith('event:')) event = line.slice(6).trim();
        if (line.startsWith('data:')) data.push(line.slice(5).trimStart());
      }
      if (data.length > 0) yield { event, data: data.join('\n') };
    }
  }
}
