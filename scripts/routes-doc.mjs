// `npm run routes-doc` (after `npm run build`): writes docs/routes.md from the OpenAPI document the
// daemon serves. It starts the built daemon (the production build, no Chromium: the route table does
// not depend on it) through the test kit on 127.0.0.1:0 with a temp state dir, reads
// GET /openapi.json, and renders it with dist/test/kit/routes-doc.js. test/http/routes-doc.test.ts
// checks the committed file against the same rendering.
/* global fetch */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const { startDaemon } = await import(path.join(root, 'dist/test/kit/daemon.js'));
const { renderRoutesDoc, ROUTES_DOC } = await import(path.join(root, 'dist/test/kit/routes-doc.js'));

const daemon = await startDaemon({ production: true, logLevel: 'info' });
try {
  const res = await fetch(`${daemon.url}/openapi.json`);
  if (res.status !== 200) throw new Error(`GET /openapi.json answered ${res.status}`);
  const file = path.join(root, ROUTES_DOC);
  writeFileSync(file, renderRoutesDoc(await res.json()));
  console.log(`wrote ${ROUTES_DOC}`);
} finally {
  await daemon.cleanup();
}
