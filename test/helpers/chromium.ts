// Helpers of the Chromium tests: the daemon's Chromium profile, and the answer to a refused
// upgrade of the CDP endpoint. (The snapshot, CDP and /proc helpers are the kit's.)
import path from 'node:path';
import WebSocket from 'ws';
import type { Daemon } from '../kit/daemon.js';

export function profileDir(d: Daemon): string {
  return path.join(d.agentDir, 'chromium-profile');
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
