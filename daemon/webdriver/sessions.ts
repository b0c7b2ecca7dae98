// The WebDriver sessions the daemon has seen ChromeDriver create: the tabs each opened (classic
// New Window, BiDi browsingContext.create: ChromeDriver's window handles and BiDi contexts are
// Chromium's target ids), closed when the session ends, and the BiDi sockets on it, closed when
// ChromeDriver or Chromium goes away. ChromeDriver attached to a running browser closes nothing at
// the session's end: the daemon closes what the session opened, and only that.
import WebSocket from 'ws';
import { CLOSE, reasonText } from '../core/streams/websocket.js';

interface Session {
  tabs: Set<string>;
  sockets: Set<WebSocket>;
}

export class Sessions {
  private readonly byId = new Map<string, Session>();

  get size(): number {
    return this.byId.size;
  }

  has(id: string): boolean {
    return this.byId.has(id);
  }

  opened(id: string): void {
    if (!this.byId.has(id)) this.byId.set(id, { tabs: new Set(), sockets: new Set() });
  }

  /** A tab the session opened. */
  tab(id: string, targetId: string): void {
    this.byId.get(id)?.tabs.add(targetId);
  }

  /** A BiDi socket on the session: closed when the session ends. */
  socket(id: string, ws: WebSocket): void {
    this.byId.get(id)?.sockets.add(ws);
    ws.once('close', () => this.byId.get(id)?.sockets.delete(ws));
  }

  /** The session ended: its sockets are closed; the tabs it opened are returned (to close). */
  ended(id: string, why = 'the WebDriver session ended'): string[] {
    const s = this.byId.get(id);
    if (s === undefined) return [];
    this.byId.delete(id);
    for (const ws of s.sockets) if (ws.readyState === WebSocket.OPEN) ws.close(CLOSE.NORMAL, reasonText(why));
    return [...s.tabs];
  }

  /** Every session is over (ChromeDriver or Chromium went away): BiDi sockets close with 1012. */
  endAll(why: string): void {
    for (const s of this.byId.values()) {
      for (const ws of s.sockets) if (ws.readyState === WebSocket.OPEN || ws.readyState === WebSocket.CONNECTING) ws.close(CLOSE.SERVICE_RESTART, reasonText(why));
    }
    this.byId.clear();
  }
}
