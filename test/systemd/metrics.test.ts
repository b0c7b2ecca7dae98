// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// GET /metrics: Prometheus text that parses line by line, holds every metric an operator needs,
// and moves when a request is served. No Chromium.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { expectError } from '../helpers/http.js';
import { startDaemon, type Daemon } from '../kit/daemon.js';
import { until } from '../kit/wait.js';

let daemon: Daemon;
before(async () => {
  daemon = await startDaemon();
});
after(() => daemon?.cleanup());

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const NAME = '[a-zA-Z_:][a-zA-Z0-9_:]*';
const LABEL = `[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\\\\n]|\\\\[\\\\"n])*"`;
const SAMPLE_RE = new RegExp(`^(${NAME})(?:\\{((?:${LABEL})(?:,${LABEL})*)?,?\\})? (\\S+)(?: -?\\d+)?$`);
const VALUE_RE = /^(?:[+-]?(?:\d+\.?\d*(?:e[+-]?\d+)?|\.\d+(?:e[+-]?\d+)?)|[+-]Inf|NaN)$/i;

/** The text exposition format (0.0.4), strictly: HELP/TYPE comments and `name{labels} value` lines. */
function parse(text: string): { types: Map<string, string>; samples: Sample[] } {
  const types = new Map<string, string>();
  const samples: Sample[] = [];
  const lines = text.split('\n');
  assert.equal(lines.at(-1), '', 'ends with a newline');
  for (const line of lines.slice(0, -1)) {
    if (line === '') continue; // the format ignores empty lines (prom-client separates families)
    if (line.startsWith('#')) {
      const m = new RegExp(`^# (HELP|TYPE) (${NAME}) (.*)$`).exec(line);
      assert.ok(m, `bad comment line: ${line}`);
      if (m[1] === 'TYPE') {
        assert.match(m[3] as string, /^(counter|gauge|histogram|summary|untyped)$/, line);
        assert.ok(!types.has(m[2] as string), `TYPE twice for ${m[2]}`);
        types.set(m[2] as string, m[3] as string);
      }
      continue;
    }
    const m = SAMPLE_RE.exec(line);
    assert.ok(m, `not a sample line: ${JSON.stringify(line)}`);
    assert.match(m[3] as string, VALUE_RE, line);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1] as string] = l[2] as string;
    const name = m[1] as string;
    const family = [...types.keys()].find((t) => name === t || ['_bucket', '_sum', '_count', '_total', '_created'].some((s) => name === t + s));
    assert.ok(family !== undefined, `sample ${name} has no TYPE line before it`);
    samples.push({ name, labels, value: Number(m[3]) });
  }
  return { types, samples };
}

async function scrape(): Promise<ReturnType<typeof parse>> {
  const res = await daemon.fetch('/metrics');
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
  return parse(await res.text());
}

function healthzCount(samples: Sample[]): number {
  const s = samples.find(
    (x) => x.name === 'browserd_http_request_duration_seconds_count' && x.labels.route === '/healthz' && x.labels.status === '200' && x.labels.method === 'GET',
  );
  return s?.value ?? 0;
}

test('/metrics needs a token with browser:read', async () => {
  await expectError(await daemon.fetch('/metrics', { headers: { authorization: 'Bearer nope-nope-nope-nope' } }), 401, 'unauthorized');
});

test('/metrics is valid Prometheus text with every metric of the daemon', async () => {
  const { types } = await scrape();
  const expected: Record<string, string> = {
    browserd_http_request_duration_seconds: 'histogram',
    browserd_chromium_restarts_total: 'counter',
    browserd_chromium_ready: 'gauge',
    browserd_extension_activations_total: 'counter',
    browserd_extension_activation_duration_seconds: 'histogram',
    browserd_stdin_bytes_total: 'counter',
    browserd_proxy_checks_total: 'counter',
    browserd_processes_live: 'gauge',
    browserd_process_resident_memory_bytes: 'gauge',
    browserd_nodejs_eventloop_lag_seconds: 'gauge',
  };
  for (const [name, type] of Object.entries(expected)) assert.equal(types.get(name), type, name);
});

test('a served request moves the request-duration histogram of its route and status', async () => {
  const before = healthzCount((await scrape()).samples);
  assert.equal((await daemon.fetch('/healthz')).status, 200);
  // The access-log/metric hook runs when the response closes: scrape until it shows (no sleep).
  const now = await until('the /healthz request in the histogram', async () => {
    const n = healthzCount((await scrape()).samples);
    return n !== before ? n : undefined;
  });
  assert.equal(now, before + 1);
  const { samples } = await scrape();
  const inf = samples.find(
    (x) => x.name === 'browserd_http_request_duration_seconds_bucket' && x.labels.route === '/healthz' && x.labels.status === '200' && x.labels.le === '+Inf',
  );
  assert.equal(inf?.value, now, 'the +Inf bucket equals the count');
  const unmatched = samples.find((x) => x.name === 'browserd_http_request_duration_seconds_count' && x.labels.route === '/metrics');
  assert.ok((unmatched?.value ?? 0) >= 1, 'the scrapes themselves are counted under their route template');
});

test('routes are labelled by template, never by the raw path (bounded cardinality)', async () => {
  await daemon.fetch('/browsers/local');
  await daemon.fetch('/no/such/path/12345');
  const samples: Sample[] = await until('both requests in the metrics', async () => {
    const s = (await scrape()).samples;
    return s.some((x) => x.labels.route === 'unmatched') && s.some((x) => x.labels.route === '/browsers/{id}') ? s : undefined;
  });
  const routes = new Set(samples.filter((x) => x.name === 'browserd_http_request_duration_seconds_count').map((x) => x.labels.route));
  assert.ok(routes.has('unmatched'), [...routes].join(' '));
  assert.ok(routes.has('/browsers/{id}'), [...routes].join(' '));
  assert.ok(![...routes].some((r) => r?.includes('12345') || r === '/browsers/local'));
});
