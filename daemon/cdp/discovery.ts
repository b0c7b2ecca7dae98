// The DevTools HTTP discovery endpoints, answered by the daemon (Chromium listens on no port):
// /json/version, /json/list (/json) and /json/protocol as Chromium shapes them, with every
// webSocketDebuggerUrl pointing at this daemon's authenticated proxy, so puppeteer.connect({browserURL})
// and playwright's connectOverCDP('http://…') work unchanged.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { Protocol } from 'devtools-protocol';
import type { CdpMux } from './mux.js';

interface VersionInfo {
  Browser: string;
  'Protocol-Version': string;
  'User-Agent': string;
  'V8-Version': string;
  'WebKit-Version': string;
  webSocketDebuggerUrl: string;
}

/** /json/version from Browser.getVersion; `wsBase` is ws://host:port/browsers/{id}/cdp. */
export function versionInfo(v: Protocol.Browser.GetVersionResponse, wsBase: string): VersionInfo {
  const webkit = /AppleWebKit\/([\d.]+)/.exec(v.userAgent)?.[1] ?? '537.36';
  return {
    Browser: v.product,
    'Protocol-Version': v.protocolVersion,
    'User-Agent': v.userAgent,
    'V8-Version': v.jsVersion,
    'WebKit-Version': `${webkit} (${v.revision})`,
    webSocketDebuggerUrl: wsBase,
  };
}

interface TargetEntry {
  description: string;
  id: string;
  title: string;
  type: string;
  url: string;
  webSocketDebuggerUrl: string;
}

/** Target kinds Chromium's /json/list leaves out. */
const UNLISTED = new Set(['browser', 'tab', 'browser_ui']);

/** /json/list: every inspectable target, each with its own WebSocket URL under this daemon. */
export async function targetList(mux: CdpMux, wsBase: string, signal?: AbortSignal): Promise<TargetEntry[]> {
  const { targetInfos } = await mux.call<{ targetInfos: Protocol.Target.TargetInfo[] }>('Target.getTargets', {}, signal);
  return targetInfos
    .filter((t) => !UNLISTED.has(t.type))
    .map((t) => ({
      description: '',
      id: t.targetId,
      title: t.title,
      type: t.type,
      url: t.url,
      webSocketDebuggerUrl: `${wsBase}/devtools/page/${encodeURIComponent(t.targetId)}`,
    }));
}

let protocolText: string | null = null;

/** /json/protocol: the browser and JavaScript domains of the devtools-protocol package, as one document (read once). */
export function protocolDocument(): string {
  if (protocolText !== null) return protocolText;
  const dir = path.join(path.dirname(createRequire(import.meta.url).resolve('devtools-protocol/package.json')), 'json');
  const read = (f: string): { version: unknown; domains: unknown[] } => JSON.parse(readFileSync(path.join(dir, f), 'utf8')) as { version: unknown; domains: unknown[] };
  const browser = read('browser_protocol.json');
  const js = read('js_protocol.json');
  protocolText = JSON.stringify({ version: browser.version, domains: [...browser.domains, ...js.domains] });
  return protocolText;
}
