// The peer of browserd's stdin route, run as its own process (as the daemon is): a bare node:http
// server that reads the JSON body, decodes `data_b64` and writes the bytes to the stdin pipe of a
// child `cat > /dev/null`, answering `{written_bytes}` once the write is flushed to the pipe.
// No auth, no validation beyond JSON, no logs: the least work the same job can take.
import { spawn } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

const child = spawn('sh', ['-c', 'cat > /dev/null'], { stdio: ['pipe', 'ignore', 'inherit'] });
const stdin = child.stdin;

const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    let data: Buffer;
    try {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { data_b64: string };
      data = Buffer.from(body.data_b64, 'base64');
    } catch {
      res.writeHead(400).end();
      return;
    }
    stdin.write(data, (err) => {
      if (err) {
        res.writeHead(500).end();
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ written_bytes: data.length }));
    });
  });
});

server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ event: 'listening', port: (server.address() as AddressInfo).port })}\n`);
});

const stop = (): void => {
  child.kill('SIGKILL');
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
