// Helpers of the Chromium tests: the browser snapshot, waiting for a state, the processes that
// belong to a daemon's Chromium (by profile dir or by an environment marker), and CDP over the
// daemon's proxy.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import WebSocket from 'ws';
import type { Daemon } from './daemon.js';

export interface Snapshot {
  id: string;
  state: string;
  reason: string | null;
  chromium: {
    pid: number | null;
    version: string | null;
    started_at: string | null;
    restarts: number;
    last_exit: { code: number | null; signal: string | null; at: string; reason: string } | null;
  };
  cdp_url: string;
  extensions: unknown[];
}

export async function browser(d: Daemon): Promise<Snapshot> {
  const res = await d.fetch('/browsers/local');
  assert.equal(res.status, 200);
  return (await res.json()) as Snapshot;
}

/** Polls GET /browsers/local until `pred` holds (a state, not a sleep, is what is asserted). */
export async function waitBrowser(d: Daemon, pred: (s: Snapshot) => boolean, what: string, timeoutMs = 60_000): Promise<Snapshot> {
  const until = Date.now() + timeoutMs;
  let last: Snapshot | null = null;
  while (Date.now() < until) {
    last = await browser(d);
    if (pred(last)) return last;
    await sleep(50);
  }
  throw new Error(`browser not ${what} within ${timeoutMs} ms; last: ${JSON.stringify(last)}`);
}

export function profileDir(d: Daemon): string {
  return path.join(d.stateDir, 'chromium-profile');
}

function procs(): { pid: number; state: string; pgid: number }[] {
  const out = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      out.push({ pid: Number(name), state: f[0] ?? '?', pgid: Number(f[2]) });
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

function readOr(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return '';
  }
}

/** Live processes whose command line names `dir`. */
export function processesNaming(dir: string): number[] {
  return procs()
    .filter((p) => p.state !== 'Z' && readOr(`/proc/${p.pid}/cmdline`).includes(dir))
    .map((p) => p.pid);
}

/** Live processes (other than `except`) whose environment holds `NAME=value`. */
export function processesWithEnv(entry: string, except: number[] = []): { pid: number; pgid: number }[] {
  return procs()
    .filter((p) => p.state !== 'Z' && !except.includes(p.pid) && readOr(`/proc/${p.pid}/environ`).split('\0').includes(entry))
    .map((p) => ({ pid: p.pid, pgid: p.pgid }));
}

/** The process group of a live process, else null. */
export function pgidOf(pid: number): number | null {
  const p = procs().find((x) => x.pid === pid && x.state !== 'Z');
  return p ? p.pgid : null;
}

/** Live members of process group `pgid`. */
export function groupMembers(pgid: number): number[] {
  return procs()
    .filter((p) => p.pgid === pgid && p.state !== 'Z')
    .map((p) => p.pid);
}

export function isAlive(pid: number): boolean {
  return procs().some((p) => p.pid === pid && p.state !== 'Z');
}

/** Polls until `pred` holds. */
export async function waitUntil(pred: () => boolean, what: string, timeoutMs = 30_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!pred()) {
    if (Date.now() >= until) throw new Error(`not ${what} within ${timeoutMs} ms`);
    await sleep(50);
  }
}

export interface CdpClient {
  ws: WebSocket;
  call<T = Record<string, unknown>>(method: string, params?: Record<string, unknown>, sessionId?: string): Promise<T>;
  closed: Promise<{ code: number; reason: string }>;
}

/** A CDP connection through the daemon's proxy. */
export async function cdpConnect(url: string, token: string): Promise<CdpClient> {
  const ws = new WebSocket(url, { headers: { authorization: `Bearer ${token}` }, maxPayload: 512 * 1024 * 1024 });
  const closed = new Promise<{ code: number; reason: string }>((resolve) => ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })));
  await new Promise<void>((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
    ws.once('unexpected-response', (_req, res) => reject(new Error(`unexpected response ${res.statusCode}`)));
  });
  let next = 1;
  const pending = new Map<number, { resolve(v: unknown): void; reject(e: Error): void }>();
  ws.on('message', (data) => {
    const msg = JSON.parse(String(data)) as { id?: number; result?: unknown; error?: { message: string } };
    const p = msg.id === undefined ? undefined : pending.get(msg.id);
    if (!p) return;
    pending.delete(msg.id as number);
    if (msg.error) p.reject(new Error(msg.error.message));
    else p.resolve(msg.result);
  });
  void closed.then(() => {
    for (const p of pending.values()) p.reject(new Error('closed'));
  });
  return {
    ws,
    closed,
    call: <T>(method: string, params: Record<string, unknown> = {}, sessionId?: string) =>
      new Promise<T>((resolve, reject) => {
        const id = next++;
        pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
        ws.send(JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) }));
      }),
  };
}

/** The status and JSON body of a refused WebSocket upgrade. */
export function upgradeRefusal(url: string, headers: Record<string, string>): Promise<{ status: number; body: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers });
    ws.on('open', () => {
      ws.terminate();
      reject(new Error('the upgrade was accepted'));
    });
    ws.on('error', () => {});
    ws.on('unexpected-response', (_req, res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => {
        ws.terminate();
        resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as Record<string, unknown> });
      });
    });
  });
}
