// docs/routes.md from the served OpenAPI document: one table per route family (the OpenAPI tag:
// the daemon module that serves it), each route with its method, path, scope, summary and the file
// that declares it (`x-source`). scripts/routes-doc.mjs writes it; test/http/routes-doc.test.ts
// regenerates it from a running daemon and compares it with the committed file.
export const ROUTES_DOC = 'docs/routes.md';
export const ROUTES_DOC_COMMAND = 'npm run routes-doc';

interface Operation {
  summary?: string;
  tags?: string[];
  'x-scope'?: string;
  'x-source'?: string;
  'x-websocket'?: boolean;
  'x-root-of'?: string;
}

export interface OpenApiDocument {
  tags?: { name: string; description?: string }[];
  paths: Record<string, Record<string, Operation>>;
}

const METHOD_ORDER = ['get', 'post', 'put', 'patch', 'delete'];

/** A table cell: one line, pipes escaped. */
function cell(text: string): string {
  return text.replace(/\s+/g, ' ').replace(/\|/g, '\\|').trim();
}

export function renderRoutesDoc(doc: OpenApiDocument): string {
  const rows = new Map<string, { method: string; path: string; op: Operation }[]>();
  /** `GET /browsers/{id}/x` → `/x`: the root paths of the browser routes, listed on their route's row. */
  const roots = new Map<string, string>();
  let rootCount = 0;
  for (const [path, ops] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      if (op['x-root-of'] !== undefined) {
        roots.set(`${method} ${op['x-root-of']}`, path);
        rootCount++;
        continue;
      }
      const family = op.tags?.[0] ?? 'other';
      const list = rows.get(family) ?? [];
      list.push({ method, path, op });
      rows.set(family, list);
    }
  }
  const families = [...rows.keys()].sort();
  const count = [...rows.values()].reduce((n, l) => n + l.length, 0);
  const out: string[] = [
    '# Routes',
    '',
    `<!-- Generated from the daemon's OpenAPI document (GET /openapi.json) by \`${ROUTES_DOC_COMMAND}\`: do not edit by hand. -->`,
    '',
    `Every route the daemon serves (${count}, and ${rootCount} of them also at their root path), by family: the module that serves it. ` +
      '**Path**: a route under `/browsers/{id}/…` is also served at the rest of its path, shown second (`/process/exec` for ' +
      '`/browsers/{id}/process/exec`): the paths the SDK calls on the VM\'s `base_url` directly. The same route: handler, scope, limits, errors; ' +
      'its `{id}` is the daemon\'s session (a session token must name it, as everywhere). ' +
      '**Source** is the file that declares the route ' +
      "(each routes file declares its routes with `route({ method, path, scope, doc, handler })`, made by `routesIn('<its path>')` of daemon/http/route.ts). " +
      '**Scope** is what the token needs: `public` needs none, `any valid token` any key or session token. ' +
      'The request and response schemas, the query parameters and the errors of each route are in the OpenAPI document itself: ' +
      '`GET /openapi.json`, or its readable rendering `GET /docs` in a browser.',
    '',
    '`GET /docs` (public, like `GET /openapi.json`: the same facts, no secret, and a person opens it from a link without a token) is that document as one ' +
      'self-contained HTML page, rendered by the daemon itself (daemon/http/docs-page.ts): one section per family, each route with its scope, parameters, ' +
      'body and responses. It needs no network: no script, font or image, and its Content-Security-Policy forbids the page any request. ' +
      'Why not Swagger UI, Redoc or RapiDoc: each is megabytes of script the one-file daemon would have to ship and serve beside itself, ' +
      'and Swagger UI sends the document to an outside validator unless told not to.',
    '',
    `Families: ${families.map((f) => `[${f}](#${f})`).join(', ')}.`,
  ];
  for (const family of families) {
    const list = (rows.get(family) ?? []).sort((a, b) => a.path.localeCompare(b.path) || METHOD_ORDER.indexOf(a.method) - METHOD_ORDER.indexOf(b.method));
    const sources = [...new Set(list.map((r) => r.op['x-source'] ?? '?'))].sort();
    out.push('', `## ${family}`, '', `Declared in ${sources.map((s) => `\`${s}\``).join(', ')}.`, '');
    out.push('| Method | Path | Scope | Summary | Source |', '| --- | --- | --- | --- | --- |');
    for (const { method, path, op } of list) {
      const m = method.toUpperCase() + (op['x-websocket'] === true ? ' (WebSocket)' : '');
      const root = roots.get(`${method} ${path}`);
      out.push(`| ${m} | \`${path}\`${root === undefined ? '' : `, \`${root}\``} | ${cell(op['x-scope'] ?? '?')} | ${cell(op.summary ?? '')} | \`${op['x-source'] ?? '?'}\` |`);
    }
  }
  return `${out.join('\n')}\n`;
}
