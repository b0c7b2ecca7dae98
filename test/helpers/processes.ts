// Helpers of the process tests: the process routes as small functions and an SSE parser of their
// output streams. (Polling and the /proc checks on real pids are the kit's.)
import assert from 'node:assert/strict';
import type { ExecResult } from '../../daemon/processes/exec.js';
import type { ProcessStatus as Status } from '../../daemon/processes/managed-process.js';
import type { Daemon } from '../kit/daemon.js';
import { until } from '../kit/wait.js';

export const PROC = '/browsers/local/process';

/** The wire shapes of status and exec, as the daemon declares them. */
export type { ExecResult, Status };

export const b64 = (data: string | Buffer): string => Buffer.from(data).toString('base64');

/** Spawns and returns the process id and pid (asserting 200). */
export async function spawnProcess(d: Daemon, body: Record<string, unknown>): Promise<{ process_id: string; pid: number }> {
  const res = await d.fetch(`${PROC}/spawn`, { method: 'POST', json: body });
  const text = await res.text();
  assert.equal(res.status, 200, text);
  return JSON.parse(text) as { process_id: string; pid: number };
}

export async function execProcess(d: Daemon, body: Record<string, unknown>): Promise<ExecResult> {
  const res = await d.fetch(`${PROC}/exec`, { method: 'POST', json: body });
  const text = await res.text();
  assert.equal(res.status, 200, text);
  return JSON.parse(text) as ExecResult;
}

export function writeStdin(d: Daemon, id: string, data: Buffer | string, close?: boolean): Promise<Response> {
  return d.fetch(`${PROC}/${id}/stdin`, { method: 'POST', json: { data_b64: b64(data), ...(close === undefined ? {} : { close }) } });
}

export function kill(d: Daemon, id: string, signal?: string): Promise<Response> {
  return d.fetch(`${PROC}/${id}/kill`, { method: 'POST', json: signal === undefined ? {} : { signal } });
}

export async function status(d: Daemon, id: string): Promise<Status> {
  const res = await d.fetch(`${PROC}/${id}/status`);
  const text = await res.text();
  assert.equal(res.status, 200, text);
  return JSON.parse(text) as Status;
}

export function waitExited(d: Daemon, id: string, timeoutMs = 30_000): Promise<Status> {
  return until(`process ${id} to exit`, async () => {
    const s = await status(d, id);
    return s.state === 'exited' ? s : undefined;
  }, timeoutMs);
}

export interface SseEvent {
  event: string;
  data: string;
  id?: string;
}

/** Parses a complete SSE text into events (comments skipped). */
export function parseSse(text: string): SseEvent[] {
  const events: SseEvent[] = [];
  for (const block of text.split('\n\n')) {
    if (block.trim() === '') continue;
    const ev: SseEvent = { event: 'message', data: '' };
    let any = false;
    for (const line of block.split('\n')) {
      if (line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
      if (field === 'event') ev.event = value;
      else if (field === 'data') ev.data = ev.data === '' ? value : `${ev.data}\n${value}`;
      else if (field === 'id') ev.id = value;
      any = true;
    }
    if (any) events.push(ev);
  }
  return events;
}

export interface Output {
  stdout: Buffer;
  stderr: Buffer;
  /** Both streams in arrival order, tagged. */
  sequence: { stream: string; data: Buffer }[];
  lost: number;
  /** The exit event's data without its `event` key (checked to be "exit"). */
  exit: { exit_code: number | null; signal: string | null } | null;
  events: SseEvent[];
}

export function decodeEvents(events: SseEvent[]): Output {
  const out: Output = { stdout: Buffer.alloc(0), stderr: Buffer.alloc(0), sequence: [], lost: 0, exit: null, events };
  const parts: Record<string, Buffer[]> = { stdout: [], stderr: [] };
  for (const e of events) {
    if (e.event === 'message') {
      const m = JSON.parse(e.data) as { stream: 'stdout' | 'stderr'; data_b64: string };
      const data = Buffer.from(m.data_b64, 'base64');
      parts[m.stream]?.push(data);
      out.sequence.push({ stream: m.stream, data });
    } else if (e.event === 'lost') {
      // The data names its event too: SSE clients such as the SDK yield only the data.
      const m = JSON.parse(e.data) as { event: string; bytes: number };
      assert.equal(m.event, 'lost', e.data);
      out.lost += m.bytes;
    } else if (e.event === 'exit') {
      const { event, ...exit } = JSON.parse(e.data) as { event: string; exit_code: number | null; signal: string | null };
      assert.equal(event, 'exit', e.data);
      out.exit = exit;
    }
  }
  out.stdout = Buffer.concat(parts.stdout ?? []);
  out.stderr = Buffer.concat(parts.stderr ?? []);
  return out;
}

/** Opens the output stream (asserting 200 and the SSE headers); the body is read by the caller. */
export async function openStream(d: Daemon, id: string, headers: Record<string, string> = {}): Promise<Response> {
  const res = await d.fetch(`${PROC}/${id}/stdout/stream`, { headers });
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
  assert.equal(res.headers.get('cache-control'), 'no-cache');
  return res;
}

/** The whole output stream of a process until its end. */
export async function readOutput(d: Daemon, id: string): Promise<Output> {
  const res = await openStream(d, id);
  return decodeEvents(parseSse(await res.text()));
}
