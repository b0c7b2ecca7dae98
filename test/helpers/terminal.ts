// Helpers of the terminal tests: the output of a process read live from its SSE stream (waiting for
// text to appear), keystrokes through the stdin route, and WebSocket attach clients.
import assert from 'node:assert/strict';
import WebSocket from 'ws';
import type { Daemon } from '../kit/daemon.js';
import { PROC, b64 } from './processes.js';

/** CSI escape sequences (bracketed paste on and off around bash's prompt, colours): left out of `text`. */
// eslint-disable-next-line no-control-regex -- ESC starts the sequences this strips
const CSI = /\x1b\[[0-9;?]*[A-Za-z]/g;

/** The output of a process as it arrives (the SSE stream, decoded); `text` grows. */
export class LiveOutput {
  /** Everything received, as latin1 text. */
  raw = '';
  exit: { exit_code: number | null; signal: string | null } | null = null;
  private waiters: (() => void)[] = [];
  private readonly ac = new AbortController();

  static async open(d: Daemon, id: string): Promise<LiveOutput> {
    const out = new LiveOutput();
    const res = await d.fetch(`${PROC}/${id}/stdout/stream`, { signal: out.ac.signal });
    assert.equal(res.status, 200);
    void out.read(res).catch(() => {});
    return out;
  }

  /** What was received without CSI escape sequences. */
  get text(): string {
    return this.raw.replace(CSI, '');
  }

  /** The current length: wait for text after this point. */
  mark(): number {
    return this.text.length;
  }

  /** Resolves with the first match of `re` in the text after `from`. */
  async waitFor(re: RegExp, from = 0, timeoutMs = 30_000): Promise<RegExpMatchArray> {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const m = this.text.slice(from).match(re);
      if (m !== null) return m;
      if (this.exit !== null) throw new Error(`the process exited (${JSON.stringify(this.exit)}) before ${re} appeared in ${JSON.stringify(this.text.slice(from))}`);
      const left = until - Date.now();
      if (left <= 0) throw new Error(`${re} did not appear in ${JSON.stringify(this.text.slice(from))}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  /** Resolves once the exit event came. */
  async waitExit(timeoutMs = 30_000): Promise<{ exit_code: number | null; signal: string | null }> {
    const until = Date.now() + timeoutMs;
    while (this.exit === null) {
      if (Date.now() > until) throw new Error('no exit event');
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 100);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    return this.exit;
  }

  close(): void {
    this.ac.abort();
  }

  private async read(res: Response): Promise<void> {
    const decoder = new TextDecoder();
    let pending = '';
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      pending += decoder.decode(chunk, { stream: true });
      let end: number;
      while ((end = pending.indexOf('\n\n')) >= 0) {
        const block = pending.slice(0, end);
        pending = pending.slice(end + 2);
        const data = block.split('\n').find((l) => l.startsWith('data: '));
        if (data === undefined) continue;
        const m = JSON.parse(data.slice(6)) as { stream?: string; data_b64?: string; event?: string; exit_code?: number | null; signal?: string | null };
        if (m.event === 'exit') this.exit = { exit_code: m.exit_code ?? null, signal: m.signal ?? null };
        else if (m.data_b64 !== undefined) this.raw += Buffer.from(m.data_b64, 'base64').toString('latin1');
        for (const w of this.waiters.splice(0)) w();
      }
    }
  }
}

/** Types on the terminal: the stdin route (asserting 200). */
export async function type(d: Daemon, id: string, keys: string | Buffer): Promise<void> {
  const res = await d.fetch(`${PROC}/${id}/stdin`, { method: 'POST', json: { data_b64: b64(keys) } });
  assert.equal(res.status, 200, await res.text());
}

export async function resize(d: Daemon, id: string, rows: number, cols: number): Promise<Response> {
  return d.fetch(`${PROC}/${id}/resize`, { method: 'POST', json: { rows, cols } });
}

/** The ws:// URL of a process's attach route. */
export function attachUrl(d: Daemon, id: string, query = ''): string {
  return `${d.url.replace(/^http/, 'ws')}${PROC}/${id}/attach${query}`;
}

export interface Attached {
  ws: WebSocket;
  text: () => string;
  /** Resolves with the first match of `re` in the output after `from`. */
  waitFor(re: RegExp, from?: number): Promise<RegExpMatchArray>;
  closed: Promise<{ code: number; reason: string }>;
  /** Text frames received (control answers). */
  controls: unknown[];
}

/** Opens an attach WebSocket with the daemon's token (or `token`) and collects what it receives. */
export function attach(d: Daemon, id: string, opts: { query?: string; token?: string } = {}): Promise<Attached> {
  const ws = new WebSocket(attachUrl(d, id, opts.query), { headers: { authorization: `Bearer ${opts.token ?? d.token}` } });
  let text = '';
  const controls: unknown[] = [];
  let wake: (() => void)[] = [];
  ws.on('message', (data: Buffer, isBinary: boolean) => {
    if (isBinary) text += data.toString('latin1');
    else controls.push(JSON.parse(data.toString()));
    for (const w of wake.splice(0)) w();
  });
  const closed = new Promise<{ code: number; reason: string }>((resolve) => ws.once('close', (code, reason) => resolve({ code, reason: reason.toString() })));
  void closed.then(() => {
    for (const w of wake.splice(0)) w();
  });
  let isClosed = false;
  void closed.then(() => (isClosed = true));
  const waitFor = async (re: RegExp, from = 0): Promise<RegExpMatchArray> => {
    const until = Date.now() + 30_000;
    for (;;) {
      const m = text.slice(from).match(re);
      if (m !== null) return m;
      if (isClosed || Date.now() > until) throw new Error(`${re} did not appear in ${JSON.stringify(text.slice(from))}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 500);
        wake.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
      wake = wake.filter(Boolean);
    }
  };
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve({ ws, text: () => text, waitFor, closed, controls }));
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => reject(Object.assign(new Error(`HTTP ${res.statusCode}: ${body}`), { status: res.statusCode, body })));
    });
    ws.once('error', reject);
  });
}
