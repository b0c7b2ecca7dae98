// The downloads of the browser, as the downloads module's own session sees them (Browser.downloadWillBegin
// and Browser.downloadProgress, which Chromium sends to every browser session that asked for
// events, whoever set the behaviour): what a client asked for (URL, suggested file name) beside
// where the file is (`allowAndName` names files by their GUID). Kept in memory, newest last, for
// the daemon's life; a file is in the downloads folder for as long as the limits let it stay.
//
// Limits: BROWSERD_DOWNLOADS_MAX_COUNT downloads listed and BROWSERD_DOWNLOADS_MAX_BYTES of
// finished files in the downloads folder. Past either, the oldest finished downloads go first:
// out of the list, and their files out of the downloads folder (a file a client had saved
// elsewhere is never removed). A download in progress is never removed.
import { rm } from 'node:fs/promises';
import path from 'node:path';
import type { Protocol } from 'devtools-protocol';
import type { Logger } from '../core/log.js';

export type DownloadState = 'in_progress' | 'completed' | 'canceled';

export interface Download {
  /** Chromium's GUID of the download. */
  id: string;
  url: string;
  suggested_filename: string;
  state: DownloadState;
  received_bytes: number;
  /** 0 when the server did not say. */
  total_bytes: number;
  /** The file, once Chromium names it (at completion); null before and for a cancelled download. */
  path: string | null;
  started_at: string;
  ended_at: string | null;
}

export interface TrackerDeps {
  log: Logger;
  downloadsDir: string;
  maxCount: number;
  maxBytes: number;
  /** A download began or ended (the telemetry of downloads). */
  onChange?(event: 'download_started' | 'download_finished', d: Download): void;
}

/** The URL without its query, fragment and credentials: what a log line or an event may carry. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname}`;
  } catch {
    return url.split(/[?#]/, 1)[0] ?? '';
  }
}

export class DownloadTracker {
  private readonly downloads = new Map<string, Download>();

  constructor(private readonly deps: TrackerDeps) {}

  list(): Download[] {
    return [...this.downloads.values()].map((d) => ({ ...d }));
  }

  begin(p: Protocol.Browser.DownloadWillBeginEvent): void {
    const d: Download = { id: p.guid, url: p.url, suggested_filename: p.suggestedFilename, state: 'in_progress', received_bytes: 0, total_bytes: 0, path: null, started_at: new Date().toISOString(), ended_at: null };
    this.downloads.delete(p.guid);
    this.downloads.set(p.guid, d);
    this.deps.log.info({ event: 'download_started', download_id: d.id, url: redactUrl(d.url), suggested_filename: d.suggested_filename }, 'a download began');
    this.deps.onChange?.('download_started', d);
    this.prune();
  }

  progress(p: Protocol.Browser.DownloadProgressEvent & { filePath?: string }): void {
    const d = this.downloads.get(p.guid);
    if (d === undefined || d.state !== 'in_progress') return;
    d.received_bytes = p.receivedBytes;
    d.total_bytes = p.totalBytes;
    if (p.state === 'inProgress') return;
    d.state = p.state === 'completed' ? 'completed' : 'canceled';
    d.ended_at = new Date().toISOString();
    if (p.state === 'completed' && typeof p.filePath === 'string' && p.filePath !== '') d.path = p.filePath;
    this.deps.log.info({ event: 'download_finished', download_id: d.id, url: redactUrl(d.url), state: d.state, bytes: d.received_bytes, path: d.path }, 'a download ended');
    this.deps.onChange?.('download_finished', d);
    this.prune();
  }

  /** Chromium is gone: what was in progress will not finish. */
  interrupted(): void {
    for (const d of this.downloads.values()) {
      if (d.state !== 'in_progress') continue;
      d.state = 'canceled';
      d.ended_at = new Date().toISOString();
      this.deps.onChange?.('download_finished', d);
    }
  }

  private inFolder(d: Download): boolean {
    return d.path !== null && path.dirname(d.path) === this.deps.downloadsDir;
  }

  /** The oldest finished downloads out while a limit is passed; their files out of the downloads folder. */
  private prune(): void {
    const { maxCount, maxBytes } = this.deps;
    let bytes = 0;
    for (const d of this.downloads.values()) if (d.state === 'completed' && this.inFolder(d)) bytes += d.received_bytes;
    for (const d of [...this.downloads.values()]) {
      if (this.downloads.size <= maxCount && bytes <= maxBytes) break;
      if (d.state === 'in_progress') continue;
      this.downloads.delete(d.id);
      if (d.state === 'completed' && this.inFolder(d)) {
        bytes -= d.received_bytes;
        const file = d.path as string;
        rm(file, { force: true }).then(
          () => this.deps.log.info({ event: 'download_removed', download_id: d.id, path: file, reason: 'limit' }, 'an old download was removed (BROWSERD_DOWNLOADS_MAX_COUNT / BROWSERD_DOWNLOADS_MAX_BYTES)'),
          (err: unknown) => this.deps.log.warn({ event: 'download_remove_failed', download_id: d.id, path: file, err }, 'an old download could not be removed'),
        );
      }
    }
  }
}
