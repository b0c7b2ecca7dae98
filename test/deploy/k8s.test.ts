// deploy/k8s/browserd.yaml is kept true to the daemon: parsed with a real YAML parser, its image is
// the package's version, its probes name public GET routes of the OpenAPI document a real daemon
// serves, every BROWSERD_* setting it sets is one the daemon reads, every folder setting is a
// writable mount (the root file system is read-only), its capabilities are exactly those of
// systemd/browserd.service, its command is the unit's node command line (the same V8 flags), and
// the Service selects the pod and its named port. And the pod's
// security model works: a daemon as uid 0 holding only the manifest's capabilities, with
// no_new_privs (setpriv stands in for the container runtime), starts a sandboxed Chromium as the
// agent user and runs a command through the API as that user.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { repoRoot, startDaemon, type Daemon } from '../kit/daemon.js';
import { waitBrowser } from '../kit/browser.js';
import { AGENT_USER, agentIds } from '../kit/agent.js';
import { execProcess } from '../helpers/processes.js';

const MANIFEST = 'deploy/k8s/browserd.yaml';

interface Probe { httpGet?: { path: string; port: string | number } }
interface Container {
  name: string;
  image: string;
  command: string[];
  ports: { name: string; containerPort: number }[];
  env: { name: string; value?: string }[];
  startupProbe?: Probe;
  readinessProbe?: Probe;
  livenessProbe?: Probe;
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  securityContext: {
    runAsUser?: number;
    allowPrivilegeEscalation?: boolean;
    privileged?: boolean;
    readOnlyRootFilesystem?: boolean;
    capabilities?: { add?: string[]; drop?: string[] };
  };
  volumeMounts: { name: string; mountPath: string; readOnly?: boolean }[];
}
interface Pod {
  kind: 'Pod';
  metadata: { labels: Record<string, string> };
  spec: { terminationGracePeriodSeconds?: number; containers: Container[]; volumes: { name: string }[] };
}
interface Service {
  kind: 'Service';
  spec: { selector: Record<string, string>; ports: { targetPort: string | number; port: number }[] };
}

let pod: Pod;
let service: Service;
let container: Container;
let d: Daemon;
let doc: { paths: Record<string, Record<string, { 'x-scope'?: string }>> };

before(async () => {
  const docs = parseAllDocuments(readFileSync(path.join(repoRoot, MANIFEST), 'utf8'));
  const parsed = (Array.isArray(docs) ? docs : [docs]).map((x) => {
    assert.deepEqual(x.errors, [], `${MANIFEST} does not parse`);
    return x.toJS() as Pod | Service;
  });
  assert.deepEqual(parsed.map((x) => x.kind), ['Pod', 'Service']);
  pod = parsed[0] as Pod;
  service = parsed[1] as Service;
  assert.equal(pod.spec.containers.length, 1);
  container = pod.spec.containers[0] as Container;
  d = await startDaemon({ production: true });
  doc = (await (await fetch(`${d.url}/openapi.json`)).json()) as typeof doc;
});
after(() => d.cleanup());

const env = (name: string): string | undefined => container.env.find((e) => e.name === name)?.value;

/** The unit's value of a key (the last line that sets it). */
function unitValue(key: string): string {
  const lines = readFileSync(path.join(repoRoot, 'systemd/browserd.service'), 'utf8').split('\n').filter((l) => l.startsWith(`${key}=`));
  assert.ok(lines.length > 0, `systemd/browserd.service sets no ${key}`);
  return (lines.at(-1) as string).slice(key.length + 1).trim();
}

test('the image is browserd at the package version', () => {
  const pkg = JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { version: string };
  assert.match(container.image, /(^|\/)browserd:[^/:@]+$/, container.image);
  assert.equal(container.image.split(':').at(-1), pkg.version, `${MANIFEST}: the image tag must be the package version ${pkg.version}`);
});

test("the container runs node as the unit's ExecStart does, with the same flags (after notify-exec.pl, which only systemd needs)", () => {
  const argv = unitValue('ExecStart').split(' ');
  assert.deepEqual(container.command, argv.slice(argv.indexOf('/opt/browserd/bin/node')));
});

test('the probes name public GET routes of the served OpenAPI document, on the port the daemon listens on', () => {
  const http = container.ports.find((p) => p.name === 'http');
  assert.ok(http, 'a port named http');
  assert.equal(env('BROWSERD_LISTEN'), `0.0.0.0:${http.containerPort}`, 'the daemon listens on the pod address, on the container port');
  const probes = { startupProbe: '/readyz', readinessProbe: '/readyz', livenessProbe: '/healthz' } as const;
  for (const [kind, expected] of Object.entries(probes)) {
    const probe = container[kind as keyof typeof probes]?.httpGet;
    assert.ok(probe, `${kind} is an httpGet probe`);
    assert.equal(probe.path, expected, kind);
    assert.equal(probe.port, 'http', kind);
    const op = doc.paths[probe.path]?.get;
    assert.ok(op, `${kind}: GET ${probe.path} is not a route of the OpenAPI document`);
    assert.equal(op['x-scope'], 'public', `${kind}: GET ${probe.path} needs a token, which a probe cannot send`);
  }
});

test("every BROWSERD_* setting it sets is one the daemon reads, the rest is the unit's Environment=, and every folder setting is a writable mount", () => {
  const config = readFileSync(path.join(repoRoot, 'daemon/core/config.ts'), 'utf8');
  const known = new Set([...config.matchAll(/'(BROWSERD_[A-Z0-9_]+)'/g)].map((m) => m[1]));
  // Besides the daemon's settings, exactly the unit's Environment= (the allocator's), with its values.
  const unitEnv = new Map(unitValue('Environment').split(' ').map((w) => [w.slice(0, w.indexOf('=')), w.slice(w.indexOf('=') + 1)]));
  assert.deepEqual(new Map(container.env.filter((e) => !e.name.startsWith('BROWSERD_')).map((e) => [e.name, e.value])), unitEnv);
  for (const { name } of container.env.filter((e) => e.name.startsWith('BROWSERD_'))) {
    assert.ok(known.has(name), `${name} is not a setting of daemon/core/config.ts`);
  }
  assert.equal(container.securityContext.readOnlyRootFilesystem, true);
  const mounts = new Map(container.volumeMounts.map((m) => [m.mountPath, m]));
  for (const setting of ['BROWSERD_STATE_DIR', 'BROWSERD_AGENT_DIR', 'BROWSERD_DOWNLOADS_DIR', 'BROWSERD_POLICY_DIR']) {
    const dir = env(setting);
    assert.ok(dir !== undefined, `${setting} is set`);
    const m = mounts.get(dir);
    assert.ok(m !== undefined && m.readOnly !== true, `${setting}=${dir} must be a writable mount`);
  }
  for (const setting of ['BROWSERD_KEYS_FILE', 'BROWSERD_JWT_KEYS_FILE']) {
    const file = env(setting) ?? '';
    assert.ok([...mounts.keys()].some((m) => file.startsWith(`${m}/`)), `${setting}=${file} is under a mount (the Secret)`);
  }
  const volumes = new Set(pod.spec.volumes.map((v) => v.name));
  for (const m of container.volumeMounts) assert.ok(volumes.has(m.name), `mount ${m.mountPath}: no volume ${m.name}`);
});

test("its capabilities are exactly systemd/browserd.service's, and nothing else is granted", () => {
  const unit = unitValue('CapabilityBoundingSet').split(/\s+/).map((c) => c.replace(/^CAP_/, '')).sort();
  assert.deepEqual(unitValue('AmbientCapabilities').split(/\s+/).map((c) => c.replace(/^CAP_/, '')).sort(), unit);
  const sc = container.securityContext;
  assert.deepEqual([...(sc.capabilities?.add ?? [])].sort(), unit);
  assert.deepEqual(sc.capabilities?.drop, ['ALL']);
  assert.equal(sc.allowPrivilegeEscalation, false, 'no_new_privs, as NoNewPrivileges=yes');
  assert.equal(sc.privileged, false);
  assert.equal(sc.runAsUser, 0, 'uid 0: Kubernetes grants no ambient capabilities to another uid');
  assert.equal(unitValue('NoNewPrivileges'), 'yes');
  assert.equal(`${pod.spec.terminationGracePeriodSeconds ?? 30}s`, unitValue('TimeoutStopSec'), 'the stop deadline is the unit\'s');
  assert.ok(container.resources?.limits?.memory, 'a memory limit (the unit has MemoryMax=)');
});

test('the Service selects the pod and its named port', () => {
  for (const [k, v] of Object.entries(service.spec.selector)) assert.equal(pod.metadata.labels[k], v, `selector ${k}`);
  assert.ok(Object.keys(service.spec.selector).includes('browserd/session'), 'one session per Service');
  for (const p of service.spec.ports) assert.ok(container.ports.some((c) => c.name === p.targetPort || c.containerPort === p.targetPort), `targetPort ${p.targetPort}`);
});

test("the pod's security model: uid 0 with only its capabilities and no_new_privs runs a sandboxed Chromium and the API's commands as the agent user", async () => {
  const caps = (container.securityContext.capabilities?.add ?? []).map((c) => `+${c.toLowerCase()}`).join(',');
  const pd = await startDaemon({ production: true, autostart: true, wrapper: ['setpriv', `--bounding-set=-all,${caps}`, '--inh-caps=-all', '--no-new-privs'] });
  try {
    const s = await waitBrowser(pd, (b) => b.state === 'ready', 'ready');
    const status = (pid: number): string => readFileSync(`/proc/${pid}/status`, 'utf8');
    assert.match(status(pd.pid), /^NoNewPrivs:\s+1$/m);
    assert.match(status(pd.pid), /^Uid:\s+0\s/m);
    const { uid } = agentIds();
    const pid = s.chromium.pid as number;
    assert.match(status(pid), new RegExp(`^Uid:\\s+${uid}\\s`, 'm'), 'Chromium runs as the agent user');
    assert.ok(!readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes('--no-sandbox'), 'with its sandbox');
    const r = await execProcess(pd, { command: 'id', args: ['-un'] });
    assert.equal(r.exit_code, 0);
    assert.equal(Buffer.from(r.stdout_b64 ?? '', 'base64').toString().trim(), AGENT_USER);
  } finally {
    await pd.cleanup();
  }
});
