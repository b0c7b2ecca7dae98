// The peer of browserd's read_file and write_file, run as its own process (as the daemon is): a bare
// node:http server. GET /read?path= streams the file (fs.createReadStream, 1 MiB chunks, piped);
// PUT /write?path= pipes the body to a temp file beside the target and renames it. No auth, no path
// checks, no logs: the least work the same job takes in Node.
import { createReadStream, createWriteStream, statSync } from 'node:fs';
import { rename } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

const server = http.createServer((req, res) => {
  const url = new URL(req.url ?? '/', 'http://peer');
  const file = url.searchParams.get('path') ?? '';
  if (req.method === 'GET' && url.pathname === '/read') {
    res.writeHead(200, { 'content-length': statSync(file).size });
    createReadStream(file, { highWaterMark: 1024 * 1024 }).pipe(res);
    return;
  }
  if (req.method === 'PUT' && url.pathname === '/write') {
    const tmp = `${file}.peer.tmp`;
    const out = createWriteStream(tmp, { highWaterMark: 1024 * 1024 });
    req.pipe(out);
    out.on('close', () => void rename(tmp, file).then(() => res.writeHead(204).end()));
    return;
  }
  res.writeHead(404).end();
});

server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ event: 'listening', port: (server.address() as AddressInfo).port })}\n`);
});
