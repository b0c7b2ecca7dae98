// The one local origin of the tests: an HTTP server on 127.0.0.1 (an ephemeral port) that pages,
// fetches and downloads are made against. A handler of its own, or one page of HTML for every path.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Origin {
  readonly server: http.Server;
  /** http://127.0.0.1:<port> (no trailing slash). */
  readonly url: string;
  readonly port: number;
  /** Closes the server, cutting kept-alive connections (Chromium keeps them). */
  close(): Promise<void>;
}

/** An HTML page answered for every path (`html` may depend on the request). */
export function htmlPage(html: string | ((req: http.IncomingMessage) => string), headers: http.OutgoingHttpHeaders = {}): http.RequestListener {
  return (req, res) => res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', ...headers }).end(typeof html === 'string' ? html : html(req));
}

/** Starts an origin; the default answers `<title>ok</title>` to every request. */
export async function startOrigin(handler: http.RequestListener = htmlPage('<title>ok</title>')): Promise<Origin> {
  const server = http.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    server,
    url: `http://127.0.0.1:${port}`,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
