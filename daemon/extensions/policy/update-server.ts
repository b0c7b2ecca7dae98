// The loopback update service of policy installs: Chromium asks GET /<id>/updates.xml (the URL
// in ExtensionInstallForcelist) and downloads GET /<id>/<file>.crx. Bound to 127.0.0.1 only;
// it serves the CRX files of the daemon's policy-mode extensions and nothing else.
import { createReadStream } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from '../../core/log.js';

interface ServedCrx {
  id: string;
  version: string;
  /** The name the CRX is served under: /<id>/<fileName>. */
  fileName: string;
  /** Where it is on disk. */
  crxFile: string;
}

const ID_RE = /^[a-p]{32}$/;

export function updateManifest(crx: ServedCrx, port: number): string {
  return (
    "<?xml version='1.0' encoding='UTF-8'?>\n" +
    "<gupdate xmlns='http://www.google.com/update2/response' protocol='2.0'>" +
    `<app appid='${crx.id}'><updatecheck codebase='http://127.0.0.1:${port}/${crx.id}/${crx.fileName}' version='${crx.version}'/></app>` +
    '</gupdate>\n'
  );
}

export class UpdateServer {
  private server: Server | null = null;
  private port: number | null = null;

  constructor(
    private readonly lookup: (id: string) => ServedCrx | null,
    private readonly log: Logger,
  ) {}

  get listeningPort(): number | null {
    return this.port;
  }

  /** The URL Chromium polls for this id (the server must be listening). */
  updateUrl(id: string): string {
    if (this.port === null) throw new Error('the update server is not listening');
    return `http://127.0.0.1:${this.port}/${id}/updates.xml`;
  }

  /** Listens (once) on 127.0.0.1, on `preferredPort` when it is free, else on any free port. */
  async ensure(preferredPort: number | null): Promise<number> {
    if (this.port !== null) return this.port;
    const server = createServer((req, res) => {
      const parts = (req.url ?? '/').split('?')[0]?.split('/').filter(Boolean) ?? [];
      const [id, file] = parts;
      const crx = parts.length === 2 && id !== undefined && ID_RE.test(id) ? this.lookup(id) : null;
      if (req.method !== 'GET' && req.method !== 'HEAD') {
        res.writeHead(405, { allow: 'GET, HEAD' }).end();
      } else if (crx === null) {
        res.writeHead(404).end();
      } else if (file === 'updates.xml') {
        this.log.debug({ event: 'extension_update_check', id }, 'update manifest served');
        res.writeHead(200, { 'content-type': 'text/xml; charset=utf-8', 'cache-control': 'no-store' }).end(updateManifest(crx, this.port ?? 0));
      } else if (file === crx.fileName) {
        this.log.debug({ event: 'extension_crx_served', id, version: crx.version }, 'CRX served');
        res.writeHead(200, { 'content-type': 'application/x-chrome-extension', 'cache-control': 'no-store' });
        if (req.method === 'HEAD') res.end();
        else createReadStream(crx.crxFile).on('error', () => res.destroy()).pipe(res);
      } else {
        res.writeHead(404).end();
      }
    });
    server.keepAliveTimeout = 2000;
    const listen = (port: number): Promise<void> =>
      new Promise((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, '127.0.0.1', () => {
          server.off('error', reject);
          resolve();
        });
      });
    try {
      await listen(preferredPort ?? 0);
    } catch (err) {
      if (preferredPort === null) throw err;
      await listen(0);
    }
    this.server = server;
    this.port = (server.address() as AddressInfo).port;
    this.log.info({ event: 'extension_update_server', port: this.port }, 'extension update server listening on loopback');
    return this.port;
  }

  async close(): Promise<void> {
    const server = this.server;
    this.server = null;
    this.port = null;
    if (server === null) return;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  }
}
