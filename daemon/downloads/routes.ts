// GET /browsers/{id}/fs/downloads: the downloads folder and the downloads in it.
import { z } from 'zod';
import { lazy } from '../core/lazy.js';
import type { Route } from '../http/router.js';
import { routesIn } from '../http/route.js';
import type { Download } from './tracker.js';

const route = routesIn('daemon/downloads/routes.ts');

export interface RouteDeps {
  downloadsDir: string;
  maxCount: number;
  maxBytes: number;
  list(): Download[];
}

const download = lazy(() => z.object({
  id: z.string().describe("Chromium's GUID of the download"),
  url: z.string(),
  suggested_filename: z.string().describe('the file name the server or the page suggested'),
  state: z.enum(['in_progress', 'completed', 'canceled']),
  received_bytes: z.number().int(),
  total_bytes: z.number().int().describe('0 when the server did not say'),
  path: z.string().nullable().describe('the file (read it with read_file); null until completed, and for a cancelled download'),
  started_at: z.string().describe('ISO time'),
  ended_at: z.string().nullable().describe('ISO time'),
}));
export const downloadsSchema = lazy(() => z.object({
  path: z.string().describe("the real path of Chromium's downloads folder (BROWSERD_DOWNLOADS_DIR)"),
  downloads: z.array(download()).describe('oldest first'),
}));

export function downloadRoutes(deps: RouteDeps): Route[] {
  return [
    route({
      method: 'GET',
      path: '/browsers/{id}/fs/downloads',
      scope: 'fs:read',
      doc: () => ({
        summary: "The browser's downloads and where they go",
        description:
          "Every download of the browser since the daemon started, whichever CDP client started it, oldest first: the URL, the suggested file name, " +
          'its state and bytes, and the file (`path`; `allowAndName` names files by their GUID), which read_file serves. ' +
          "The daemon owns the download behaviour: a client's Browser.setDownloadBehavior (or Page.setDownloadBehavior) is answered as Chromium " +
          'answers it, but a downloadPath that is not a folder the browser may write to on this VM becomes the downloads folder ' +
          "(BROWSERD_DOWNLOADS_DIR), `default` means the daemon's behaviour, and what a client set is undone when it disconnects. " +
          `Limits: ${deps.maxCount} downloads listed (BROWSERD_DOWNLOADS_MAX_COUNT) and ${deps.maxBytes} bytes of finished files in the downloads ` +
          'folder (BROWSERD_DOWNLOADS_MAX_BYTES); past either, the oldest finished downloads are removed first, with their files in the downloads ' +
          'folder (a file saved elsewhere is left alone). The list is kept in memory: a daemon restart starts it empty (the files stay).',
        responses: { 200: { description: 'the folder and the downloads', schema: downloadsSchema() } },
      }),
      handler: () => Promise.resolve({ status: 200, body: { path: deps.downloadsDir, downloads: deps.list() } }),
    }),
  ];
}
