// The peer of the forwarder's tunnel row: the least an extra hop in Node can do for a tunnel, in a
// process of its own (as the daemon is). It reads the client's CONNECT head, opens a connection to
// the upstream proxy (argv[2], a port on 127.0.0.1), writes the same head there and pipes both
// ways (the upstream's 200 goes back through the pipe). No peer check, no routing, no parsing of
// the answer. Prints {"port":N} once listening.
import net from 'node:net';

const upstreamPort = Number(process.argv[2]);

const server = net.createServer((client) => {
  client.setNoDelay(true);
  let head = Buffer.alloc(0);
  const onData = (c: Buffer): void => {
    head = Buffer.concat([head, c]);
    if (head.indexOf('\r\n\r\n') === -1) return;
    client.off('data', onData);
    client.pause();
    const up = net.connect({ port: upstreamPort, host: '127.0.0.1', noDelay: true }, () => {
      up.write(head);
      client.pipe(up);
      up.pipe(client);
      client.resume();
    });
    up.on('error', () => client.destroy());
    client.on('close', () => up.destroy());
  };
  client.on('data', onData);
  client.on('error', () => client.destroy());
});
server.listen(0, '127.0.0.1', () => process.stdout.write(`${JSON.stringify({ port: (server.address() as net.AddressInfo).port })}\n`));
