// GET /docs: the OpenAPI document as one self-contained HTML page a person reads in a browser. The
// daemon renders it itself, once, from the same document GET /openapi.json serves: one section per
// family (the document's tags), each operation with its method, path, scope, summary, description,
// parameters, request body and responses, their schemas as nested field lists. No script, no font,
// no image, no link to anything outside the page: it works offline, and its Content-Security-Policy
// (DOCS_PAGE_CSP) forbids any request from it. Why not a library (Swagger UI, Redoc, RapiDoc): they
// are megabytes of script that the one-file daemon would have to ship beside itself, and Swagger UI
// asks an outside validator about the document unless told not to (docs/routes.md says so too).

/** No request of any kind from the page: only its own inline style. */
export const DOCS_PAGE_CSP = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/** How deep nested schemas are drawn; deeper ones say "…" (the JSON is in GET /openapi.json). */
const MAX_SCHEMA_DEPTH = 8;

type Json = Record<string, unknown>;
const METHODS = ['get', 'post', 'put', 'patch', 'delete'] as const;

const esc = (s: unknown): string =>
  String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] as string);

const isObj = (x: unknown): x is Json => typeof x === 'object' && x !== null && !Array.isArray(x);

/** Prose of the document: escaped, `code` spans kept as code, paragraphs and line breaks kept. */
function prose(text: unknown): string {
  if (typeof text !== 'string' || text === '') return '';
  const html = esc(text).replace(/`([^`\n]+)`/g, '<code>$1</code>');
  return html
    .split(/\n{2,}/)
    .map((p) => `<p>${p.replace(/\n/g, '<br>')}</p>`)
    .join('');
}

/** An anchor name from free text (operationIds and tags are already plain). */
const anchor = (s: string): string => s.replace(/[^A-Za-z0-9_-]/g, '-');

class Renderer {
  constructor(private readonly doc: Json) {}

  private resolve(schema: Json): { schema: Json; ref: string | null } {
    const ref = schema.$ref;
    if (typeof ref !== 'string' || !ref.startsWith('#/')) return { schema, ref: null };
    let at: unknown = this.doc;
    for (const part of ref.slice(2).split('/')) at = isObj(at) ? at[part] : undefined;
    return { schema: isObj(at) ? at : {}, ref: ref.split('/').pop() ?? ref };
  }

  /** One line about a schema: its type and constraints. */
  private typeOf(s: Json, ref: string | null): string {
    const bits: string[] = [];
    if (ref !== null) bits.push(esc(ref));
    if ('const' in s) bits.push(`= <code>${esc(JSON.stringify(s.const))}</code>`);
    else if (Array.isArray(s.enum)) bits.push(`one of ${s.enum.map((v) => `<code>${esc(JSON.stringify(v))}</code>`).join(', ')}`);
    else if (s.type !== undefined) bits.push(esc(Array.isArray(s.type) ? s.type.join(' | ') : s.type));
    if (s.type === 'array' && isObj(s.items)) {
      const item = this.resolve(s.items);
      bits.push(`of ${this.typeOf(item.schema, item.ref) || 'any'}`);
    }
    if (typeof s.format === 'string') bits.push(`(${esc(s.format)})`);
    if (typeof s.contentMediaType === 'string') bits.push(`(${esc(s.contentMediaType)})`);
    const limits: [string, string][] = [
      ['minimum', '≥'], ['exclusiveMinimum', '>'], ['maximum', '≤'], ['exclusiveMaximum', '<'],
      ['minLength', 'length ≥'], ['maxLength', 'length ≤'], ['minItems', 'items ≥'], ['maxItems', 'items ≤'],
    ];
    for (const [k, sign] of limits) if (typeof s[k] === 'number') bits.push(`${sign} ${esc(s[k])}`);
    if (typeof s.pattern === 'string') bits.push(`matching <code>${esc(s.pattern)}</code>`);
    if ('default' in s) bits.push(`default <code>${esc(JSON.stringify(s.default))}</code>`);
    return bits.join(' ');
  }

  /** A schema as nested lists of its fields (objects), items (arrays) and alternatives (anyOf/oneOf). */
  schema(input: unknown, depth = 0): string {
    if (!isObj(input)) return '';
    const { schema: s, ref } = this.resolve(input);
    if (depth > MAX_SCHEMA_DEPTH) return '<p class="muted">… (deeper: see GET /openapi.json)</p>';
    const parts: string[] = [];
    const head = this.typeOf(s, ref);
    if (depth === 0 && head !== '') parts.push(`<p class="type">${head}</p>`);
    if (depth === 0) parts.push(prose(s.description));
    const alternatives = (Array.isArray(s.anyOf) ? s.anyOf : Array.isArray(s.oneOf) ? s.oneOf : Array.isArray(s.allOf) ? s.allOf : null) as unknown[] | null;
    if (alternatives !== null) {
      const word = Array.isArray(s.allOf) ? 'all of' : 'one of';
      parts.push(`<ul class="alt">${alternatives.map((a) => `<li><span class="muted">${word}:</span> ${this.field(null, a, false, depth + 1)}</li>`).join('')}</ul>`);
    }
    const props = isObj(s.properties) ? s.properties : null;
    if (props !== null && Object.keys(props).length > 0) {
      const required = new Set(Array.isArray(s.required) ? (s.required as string[]) : []);
      parts.push(`<ul class="fields">${Object.entries(props).map(([name, p]) => `<li>${this.field(name, p, required.has(name), depth + 1)}</li>`).join('')}</ul>`);
    }
    if (s.type === 'array' && isObj(s.items)) {
      const inner = this.schema(s.items, depth + 1);
      if (inner.includes('<ul')) parts.push(`<div class="items"><span class="muted">each item:</span>${inner}</div>`);
    }
    if (isObj(s.additionalProperties)) parts.push(`<div class="items"><span class="muted">each value:</span> ${this.field(null, s.additionalProperties, false, depth + 1)}</div>`);
    return parts.join('');
  }

  private field(name: string | null, input: unknown, required: boolean, depth: number): string {
    if (!isObj(input)) return name === null ? 'any' : `<code>${esc(name)}</code>`;
    const { schema: s, ref } = this.resolve(input);
    const title = name === null ? '' : `<code class="name">${esc(name)}</code>${required ? ' <span class="req">required</span>' : ''} `;
    const type = this.typeOf(s, ref);
    const alternatives = Array.isArray(s.anyOf) || Array.isArray(s.oneOf) || Array.isArray(s.allOf);
    return `${title}<span class="type">${type !== '' ? type : alternatives ? '' : 'any'}</span>${prose(s.description)}${this.schema({ ...s, description: undefined }, depth).replace(/^<p class="type">.*?<\/p>/, '')}`;
  }

  operation(method: string, path: string, op: Json): string {
    const id = anchor(String(op.operationId ?? `${method}-${path}`));
    const out: string[] = [`<section class="op" id="${esc(id)}">`];
    const ws = op['x-websocket'] === true ? ' <span class="tag">WebSocket</span>' : '';
    out.push(`<h3><a href="#${esc(id)}"><span class="method ${esc(method)}">${esc(method.toUpperCase())}</span> <code>${esc(path)}</code></a>${ws}</h3>`);
    out.push(`<p class="summary">${esc(op.summary ?? '')}</p>`);
    out.push(`<p class="meta">Scope: <b>${esc(op['x-scope'] ?? '?')}</b> · served by <code>${esc(op['x-source'] ?? '?')}</code> · operationId <code>${esc(op.operationId ?? '')}</code></p>`);
    out.push(prose(op.description));
    const params = Array.isArray(op.parameters) ? (op.parameters as Json[]) : [];
    if (params.length > 0) {
      out.push('<h4>Parameters</h4><table><tr><th>Name</th><th>In</th><th>Type</th><th>Description</th></tr>');
      for (const p of params) {
        const s = isObj(p.schema) ? p.schema : {};
        out.push(
          `<tr><td><code>${esc(p.name)}</code>${p.required === true ? ' <span class="req">required</span>' : ''}</td><td>${esc(p.in)}</td>` +
            `<td>${this.typeOf(s, null)}</td><td>${prose(p.description ?? s.description)}</td></tr>`,
        );
      }
      out.push('</table>');
    }
    const body = isObj(op.requestBody) ? op.requestBody : null;
    if (body !== null && isObj(body.content)) {
      for (const [media, c] of Object.entries(body.content)) {
        out.push(`<h4>Request body <code>${esc(media)}</code>${body.required === false ? ' <span class="muted">(optional)</span>' : ''}</h4>`);
        out.push(`<div class="schema">${this.schema(isObj(c) ? c.schema : undefined)}</div>`);
      }
    }
    const responses = isObj(op.responses) ? op.responses : {};
    out.push('<h4>Responses</h4><dl class="responses">');
    for (const [status, r] of Object.entries(responses)) {
      if (!isObj(r)) continue;
      const content = isObj(r.content) ? Object.entries(r.content) : [];
      out.push(`<dt class="s${esc(status[0])}">${esc(status)}</dt><dd>${prose(r.description)}`);
      for (const [media, c] of content) {
        const ref = isObj(c) && isObj(c.schema) && typeof c.schema.$ref === 'string' ? c.schema.$ref : null;
        // The shared error shape is drawn once, at the top of the page.
        if (ref === '#/components/schemas/Error') out.push(`<p class="muted"><code>${esc(media)}</code>: <a href="#error-shape">the error shape</a></p>`);
        else out.push(`<details><summary><code>${esc(media)}</code></summary><div class="schema">${this.schema(isObj(c) ? c.schema : undefined)}</div></details>`);
      }
      out.push('</dd>');
    }
    out.push('</dl></section>');
    return out.join('\n');
  }
}

const STYLE = `
body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#1d2330;background:#fff}
main{max-width:1100px;margin:0 auto;padding:1rem 2rem 4rem}
nav{columns:4 12rem;background:#f4f6fa;padding:.6rem 1rem;border-radius:6px}
nav a{display:block}
h1{margin-bottom:.2rem}h2{border-bottom:2px solid #d6dbe6;padding-top:1.5rem}
h3{margin:.2rem 0;font-size:1.05rem}h3 a{color:inherit;text-decoration:none}
h4{margin:.8rem 0 .3rem;font-size:.9rem;text-transform:uppercase;letter-spacing:.03em;color:#555}
.op{border:1px solid #d6dbe6;border-radius:6px;padding:.6rem 1rem;margin:1rem 0}
.method{display:inline-block;min-width:4.2em;text-align:center;color:#fff;border-radius:4px;padding:0 .3em;font-size:.85em}
.get{background:#2b6cb0}.post{background:#2f855a}.put{background:#b7791f}.patch{background:#6b46c1}.delete{background:#c53030}
.summary{font-weight:600;margin:.3rem 0}.meta,.muted{color:#5a6272;font-size:.9em}
.tag{background:#edf2f7;border-radius:4px;padding:0 .4em;font-size:.8em}
.req{color:#c53030;font-size:.8em}.type{color:#2c5282}
code{background:#f4f6fa;border-radius:3px;padding:0 .2em;font-size:.92em}
table{border-collapse:collapse;width:100%}td,th{border:1px solid #e2e6ee;padding:.25rem .5rem;vertical-align:top;text-align:left}
ul.fields,ul.alt{margin:.2rem 0;padding-left:1.2rem}ul.fields li{margin:.15rem 0}
p{margin:.3rem 0}dl.responses dt{font-weight:700;float:left;width:3.2em}dl.responses dd{margin-left:3.6em;min-height:1.4em}
.s2{color:#2f855a}.s4{color:#c05621}.s5{color:#c53030}details summary{cursor:pointer}
`;

/** The whole page for an OpenAPI 3.1 document as http/openapi.ts builds it. */
export function renderDocsPage(doc: Json): string {
  const r = new Renderer(doc);
  const info = isObj(doc.info) ? doc.info : {};
  const paths = isObj(doc.paths) ? doc.paths : {};
  const byTag = new Map<string, { method: string; path: string; op: Json }[]>();
  for (const [path, ops] of Object.entries(paths)) {
    if (!isObj(ops)) continue;
    for (const method of METHODS) {
      const op = ops[method];
      if (!isObj(op)) continue;
      const tag = Array.isArray(op.tags) && typeof op.tags[0] === 'string' ? op.tags[0] : 'other';
      const list = byTag.get(tag) ?? [];
      list.push({ method, path, op });
      byTag.set(tag, list);
    }
  }
  const tags = [...byTag.keys()].sort();
  const tagText = new Map((Array.isArray(doc.tags) ? (doc.tags as Json[]) : []).map((t) => [String(t.name), String(t.description ?? '')]));
  const components = isObj(doc.components) ? doc.components : {};
  const schemes = isObj(components.securitySchemes) ? components.securitySchemes : {};
  const errorSchema = isObj(components.schemas) && isObj(components.schemas.Error) ? components.schemas.Error : {};
  const count = [...byTag.values()].reduce((n, l) => n + l.length, 0);
  const out: string[] = [
    '<!doctype html><html lang="en"><head><meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    `<title>${esc(info.title ?? 'API')} ${esc(info.version ?? '')}: API reference</title><style>${STYLE}</style></head><body><main>`,
    `<h1>${esc(info.title ?? 'API')} <span class="muted">${esc(info.version ?? '')}</span></h1>`,
    prose(info.description),
    `<p class="muted">${count} routes, rendered by the daemon from <a href="openapi.json">its OpenAPI document</a> (GET /openapi.json, the same facts as JSON).</p>`,
    `<nav>${tags.map((t) => `<a href="#tag-${esc(anchor(t))}">${esc(t)} (${byTag.get(t)?.length ?? 0})</a>`).join('')}</nav>`,
    '<h2 id="auth">Authentication</h2><dl>',
    ...Object.entries(schemes).map(([name, s]) => `<dt><code>${esc(name)}</code></dt><dd>${isObj(s) ? prose(s.description) : ''}</dd>`),
    '</dl>',
    '<h2 id="error-shape">The error shape</h2><p>Every error answers with this JSON body; the statuses each route can answer are listed with it.</p>',
    `<div class="schema">${r.schema(errorSchema)}</div>`,
  ];
  for (const t of tags) {
    const list = (byTag.get(t) ?? []).sort((a, b) => a.path.localeCompare(b.path) || METHODS.indexOf(a.method as (typeof METHODS)[number]) - METHODS.indexOf(b.method as (typeof METHODS)[number]));
    out.push(`<h2 id="tag-${esc(anchor(t))}">${esc(t)}</h2>`, prose(tagText.get(t)));
    for (const { method, path, op } of list) out.push(r.operation(method, path, op));
  }
  out.push('</main></body></html>');
  return out.join('\n');
}
