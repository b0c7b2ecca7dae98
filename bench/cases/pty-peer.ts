// The socket peer of the terminal keystroke row, run as its own process (as the daemon is): a bare
// `ws` server on loopback whose one connection is a node-pty terminal running the program given in
// argv (binary frames in → the terminal, the terminal's output → binary frames out). No HTTP routes,
// auth, stdin queue or replay buffer: the least a terminal reached over a WebSocket takes.
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import type * as NodePty from '@lydell/node-pty';
import { WebSocketServer } from 'ws';

const pty = createRequire(import.meta.url)('@lydell/node-pty') as typeof NodePty;
const [command = 'sh', ...args] = process.argv.slice(2);
const terms: NodePty.IPty[] = [];

const server = new WebSocketServer({ host: '127.0.0.1', port: 0, perMessageDeflate: false });
server.on('connection', (ws) => {
  const term = pty.spawn(command, args, { cols: 80, rows: 24, env: { PATH: process.env.PATH ?? '/usr/bin:/bin' }, encoding: null });
  terms.push(term);
  term.onData((d) => ws.send(d as unknown as Buffer, { binary: true }));
  ws.on('message', (data: Buffer) => term.write(data.toString('latin1')));
  ws.on('close', () => term.kill('SIGKILL'));
});
server.on('listening', () => {
  process.stdout.write(`${JSON.stringify({ event: 'listening', port: (server.address() as AddressInfo).port })}\n`);
});

const stop = (): void => {
  for (const t of terms) t.kill('SIGKILL');
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
