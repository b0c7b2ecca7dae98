// The WebMCP module: the tools pages register with document.modelContext.registerTool, listed and
// called for agents (GET /browsers/{id}/webmcp/tools, POST /browsers/{id}/webmcp/invoke; scope
// `webmcp`) over CDP's WebMCP domain (Chromium runs with --enable-features=WebMCPTesting,
// DevToolsWebMCPSupport: chromium/flags.ts). Stateless: each request reads the pages afresh on a
// browser-level session of its own. Its face is createWebMcp().
import type { Browser } from '../chromium/types.js';
import type { Route } from '../http/router.js';
import type { Module } from '../module.js';
import { webmcpRoutes } from './routes.js';

export { listTools, invokeTool, type ListedTool, type Invocation } from './tools.js';
export { decodeToolRef, encodeToolRef, type ToolRef } from './tool-ref.js';

interface WebMcpDeps {
  browser: Pick<Browser, 'withCdp'>;
  /** A telemetry event per invocation (type `webmcp`). */
  onInvoked(data: Record<string, unknown>): void;
}

export interface WebMcp extends Module {
  readonly routes: Route[];
}

export function createWebMcp(deps: WebMcpDeps): WebMcp {
  return { name: 'webmcp', routes: webmcpRoutes(deps) };
}
