// Settings: read once from the environment, validated here and nowhere else (their shape: config-shape.ts).
// A bad value throws ConfigError naming the setting; main logs it in one line and exits 2.
import { existsSync } from 'node:fs';
import path from 'node:path';
import type { Config } from './config-shape.js';
import { ConfigError } from './config-error.js';
import { ownedBy, OWNED_FLAGS, splitFlags } from './flags-parse.js';
import { DEFAULT_VIEWPORT, parseViewport, type Viewport } from './viewport.js';
import { chromiumTmpDir, checkDownloadsDir, prepareAgentDir, prepareStateDir } from './state-dir.js';
import { parseTestHooks } from './test-hooks.js';
import { daemonUser, findSetpriv, lookupUser, maySwitchUsers } from './users.js';
import { findOnPath, isExecutable } from './which.js';
import { parseProviders } from './proxy-providers.js';
import { SSE_STALL_MS } from './streams/sse.js';

export type { Config } from './config-shape.js';
export { ConfigError } from './config-error.js';

export { MANAGED_PROXY_TYPES, type ManagedProxyType, type ProxyGateway } from './proxy-providers.js';

type Env = Record<string, string | undefined>;

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;
const SESSION_RE = /^[A-Za-z0-9._-]{1,128}$/;
const DEFAULT_CHECK_URLS = ['https://api.ipify.org?format=json', 'https://ifconfig.me/ip'];

export function loadConfig(env: Env = process.env, cwd = process.cwd()): Config {
  const get = (name: string): string | undefined => {
    const v = env[name];
    return v === undefined || v.trim() === '' ? undefined : v.trim();
  };
  const int = (name: string, def: number, min: number, max: number): number => {
    const raw = get(name);
    if (raw === undefined) return def;
    if (!/^\d+$/.test(raw)) throw new ConfigError(name, `must be a whole number, got "${raw}"`);
    const n = Number(raw);
    if (n < min || n > max) throw new ConfigError(name, `must be between ${min} and ${max}, got ${n}`);
    return n;
  };
  /** A total that must hold at least one of the items it sums (else no request could ever be accepted). */
  const atLeast = (name: string, value: number, itemSetting: string, item: number): number => {
    if (value < item) throw new ConfigError(name, `must be at least ${itemSetting} (${item}), got ${value}`);
    return value;
  };
  const bool = (name: string, def: boolean): boolean => {
    const raw = get(name);
    if (raw === undefined) return def;
    if (/^(true|1|yes)$/i.test(raw)) return true;
    if (/^(false|0|no)$/i.test(raw)) return false;
    throw new ConfigError(name, `must be true or false, got "${raw}"`);
  };

  // systemd lists every StateDirectory= entry in STATE_DIRECTORY, colon separated: the first is the daemon's.
  const stateDir = prepareStateDir(path.resolve(cwd, get('BROWSERD_STATE_DIR') ?? get('STATE_DIRECTORY')?.split(':')[0] ?? '.browserd'));
  const agent = loadAgent(get('BROWSERD_AGENT_USER') ?? 'browser', stateDir, path.resolve(cwd, get('BROWSERD_AGENT_DIR') ?? `${stateDir}-agent`));
  const sessionId = get('BROWSERD_SESSION_ID') ?? 'local';
  if (!SESSION_RE.test(sessionId)) throw new ConfigError('BROWSERD_SESSION_ID', 'must match ^[A-Za-z0-9._-]{1,128}$');
  const projectId = get('BROWSERD_PROJECT_ID') ?? null;
  const token = get('BROWSERD_TOKEN') ?? null;
  if (token !== null && token.length < 16) throw new ConfigError('BROWSERD_TOKEN', 'must be at least 16 characters');
  const keysFile = get('BROWSERD_KEYS_FILE') ?? null;
  if (keysFile !== null && !existsSync(keysFile)) throw new ConfigError('BROWSERD_KEYS_FILE', `no file at ${keysFile}`);

  const jwtKeysFile = get('BROWSERD_JWT_KEYS_FILE') ?? null;
  if (jwtKeysFile !== null && !existsSync(jwtKeysFile)) throw new ConfigError('BROWSERD_JWT_KEYS_FILE', `no file at ${jwtKeysFile}`);
  const jwtAudience = get('BROWSERD_JWT_AUDIENCE') ?? 'browserd';
  if (!/^[\x21-\x7e]{1,256}$/.test(jwtAudience)) throw new ConfigError('BROWSERD_JWT_AUDIENCE', 'must be 1-256 printable characters without spaces');
  const baseUrl = parseBaseUrl(get('BROWSERD_BASE_URL'));

  const logLevel = get('BROWSERD_LOG_LEVEL') ?? 'info';
  if (!['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].includes(logLevel)) {
    throw new ConfigError('BROWSERD_LOG_LEVEL', `must be one of fatal, error, warn, info, debug, trace, silent; got "${logLevel}"`);
  }

  const extraFlags = parseExtraFlags(get('BROWSERD_CHROMIUM_FLAGS'));
  const stdinLimitBytes = int('BROWSERD_STDIN_LIMIT_BYTES', 8 * MiB, 1, 256 * MiB);

  return {
    listen: parseListen(get('BROWSERD_LISTEN') ?? '127.0.0.1:10001'),
    stateDir,
    agent,
    sessionId,
    projectId,
    token,
    keysFile,
    jwt: { keysFile: jwtKeysFile, audience: jwtAudience, ttlSec: int('BROWSERD_JWT_TTL_SEC', 3600, 10, 86_400) },
    baseUrl,
    logLevel,
    http: {
      // JSON bodies; the stdin route allows its own larger limit (base64 of BROWSERD_STDIN_LIMIT_BYTES).
      bodyLimitBytes: int('BROWSERD_BODY_LIMIT_BYTES', 1 * MiB, 1024, 64 * MiB),
      shutdownTimeoutMs: int('BROWSERD_SHUTDOWN_TIMEOUT_MS', 10_000, 100, 600_000),
      idempotencyMaxKeys: int('BROWSERD_IDEMPOTENCY_MAX_KEYS', 10_000, 1, 1_000_000),
      idempotencyMaxBytes: int('BROWSERD_IDEMPOTENCY_MAX_BYTES', 128 * MiB, 1024, 4096 * MiB),
      requestIdleTimeoutMs: int('BROWSERD_REQUEST_IDLE_TIMEOUT_MS', 60_000, 100, 3_600_000),
      sseStallMs: int('BROWSERD_SSE_STALL_MS', SSE_STALL_MS, 100, 3_600_000),
    },
    chromium: {
      binary: resolveChromium(get('BROWSERD_CHROMIUM'), env),
      extraFlags,
      headless: bool('BROWSERD_HEADLESS', true),
      viewport: viewportSetting(get('BROWSERD_VIEWPORT')),
      policyDir: path.resolve(cwd, get('BROWSERD_POLICY_DIR') ?? '/etc/chromium/policies/managed'),
      autostart: bool('BROWSERD_BROWSER_AUTOSTART', true),
      readyTimeoutMs: int('BROWSERD_READY_TIMEOUT_MS', 30_000, 1000, 600_000),
      stopGraceMs: int('BROWSERD_STOP_GRACE_MS', 5000, 100, 120_000),
      crashLoopMax: int('BROWSERD_CRASH_LOOP_MAX', 5, 1, 1000),
      crashLoopWindowMs: int('BROWSERD_CRASH_LOOP_WINDOW_MS', 60_000, 1000, 3_600_000),
      backoffInitialMs: int('BROWSERD_RESTART_BACKOFF_MS', 250, 0, 600_000),
      backoffMaxMs: int('BROWSERD_RESTART_BACKOFF_MAX_MS', 30_000, 0, 3_600_000),
      cdpMaxMessageBytes: int('BROWSERD_CDP_MAX_MESSAGE_BYTES', 256 * MiB, 1024, 1024 * MiB),
      cdpClientQueueBytes: int('BROWSERD_CDP_CLIENT_QUEUE_BYTES', 64 * MiB, 1024, 4096 * MiB),
      cdpQueueTotalBytes: int('BROWSERD_CDP_QUEUE_TOTAL_BYTES', 128 * MiB, 1024, 4096 * MiB),
      tmpDir: chromiumTmpDir(agent.dir),
      sandbox: bool('BROWSERD_CHROMIUM_SANDBOX', true),
    },
    processes: {
      maxLive: int('BROWSERD_MAX_PROCESSES', 64, 1, 10_000),
      retentionMs: int('BROWSERD_PROCESS_RETENTION_SEC', 300, 0, 86_400) * 1000,
      replayBufferBytes: int('BROWSERD_OUTPUT_BUFFER_BYTES', 1 * MiB, 1024, 256 * MiB),
      execOutputLimitBytes: int('BROWSERD_EXEC_OUTPUT_LIMIT_BYTES', 16 * MiB, 1024, 256 * MiB),
      execOutputTotalBytes: int('BROWSERD_EXEC_OUTPUT_TOTAL_BYTES', 64 * MiB, 1024, 4096 * MiB),
      outputRetainedBytes: int('BROWSERD_OUTPUT_RETAINED_BYTES', 64 * MiB, 0, 4096 * MiB),
      stdinLimitBytes,
      stdinTimeoutMs: int('BROWSERD_STDIN_TIMEOUT_MS', 30_000, 100, 600_000),
      stdinQueueTotalBytes: atLeast('BROWSERD_STDIN_QUEUE_TOTAL_BYTES', int('BROWSERD_STDIN_QUEUE_TOTAL_BYTES', 64 * MiB, 1024, 4096 * MiB), 'BROWSERD_STDIN_LIMIT_BYTES', stdinLimitBytes),
    },
    extensions: {
      maxItems: int('BROWSERD_EXTENSION_MAX_ITEMS', 20, 1, 1000),
      maxArchiveBytes: int('BROWSERD_EXTENSION_MAX_ARCHIVE_BYTES', 50 * MiB, 1024, 1024 * MiB),
      maxRequestBytes: int('BROWSERD_EXTENSION_MAX_REQUEST_BYTES', 200 * MiB, 1024, 4096 * MiB),
      maxEntries: int('BROWSERD_EXTENSION_MAX_ENTRIES', 10_000, 1, 1_000_000),
      maxUnpackedBytes: int('BROWSERD_EXTENSION_MAX_UNPACKED_BYTES', 200 * MiB, 1024, 4096 * MiB),
      maxConcurrentUploads: int('BROWSERD_EXTENSION_MAX_UPLOADS', 4, 1, 100),
      activationTimeoutMs: int('BROWSERD_EXTENSION_ACTIVATION_TIMEOUT_MS', 10_000, 100, 600_000),
    },
    fs: {
      downloadsDir: checkDownloadsDir(path.resolve(cwd, get('BROWSERD_DOWNLOADS_DIR') ?? path.join(path.dirname(stateDir), 'browserd-downloads')), stateDir),
      downloadsMaxCount: int('BROWSERD_DOWNLOADS_MAX_COUNT', 1000, 1, 1_000_000),
      downloadsMaxBytes: int('BROWSERD_DOWNLOADS_MAX_BYTES', 8 * GiB, 1, 1024 * GiB),
      maxFileBytes: int('BROWSERD_FS_MAX_FILE_BYTES', 4 * GiB, 1, 1024 * GiB),
      maxUploadBytes: int('BROWSERD_FS_MAX_UPLOAD_BYTES', 4 * GiB, 1024, 1024 * GiB),
      maxUploadFiles: int('BROWSERD_FS_MAX_UPLOAD_FILES', 100, 1, 10_000),
      maxZipBytes: int('BROWSERD_FS_MAX_ZIP_BYTES', 1 * GiB, 1024, 1024 * GiB),
      maxZipEntries: int('BROWSERD_FS_MAX_ZIP_ENTRIES', 100_000, 1, 10_000_000),
      maxUnpackedBytes: int('BROWSERD_FS_MAX_UNPACKED_BYTES', 4 * GiB, 1024, 1024 * GiB),
      maxListEntries: int('BROWSERD_FS_MAX_LIST_ENTRIES', 100_000, 1, 10_000_000),
      maxWatches: int('BROWSERD_FS_MAX_WATCHES', 32, 1, 10_000),
      watchQueue: int('BROWSERD_FS_WATCH_QUEUE', 4096, 1, 1_000_000),
      watchMaxDirs: int('BROWSERD_FS_WATCH_MAX_DIRS', 4096, 1, 1_000_000),
      watchIdleMs: int('BROWSERD_FS_WATCH_IDLE_SEC', 300, 1, 86_400) * 1000,
    },
    replays: {
      ffmpeg: get('BROWSERD_FFMPEG') ?? 'ffmpeg',
      defaultFramerate: int('BROWSERD_REPLAY_FRAMERATE', 10, 1, 30),
      maxFramerate: int('BROWSERD_REPLAY_MAX_FRAMERATE', 20, 1, 60),
      maxActive: int('BROWSERD_REPLAY_MAX_ACTIVE', 4, 1, 64),
      maxDurationSec: int('BROWSERD_REPLAY_MAX_DURATION_SEC', 3600, 1, 86_400),
      maxBytes: int('BROWSERD_REPLAY_MAX_BYTES', 2 * GiB, MiB, 1024 * GiB),
      minFreeBytes: int('BROWSERD_REPLAY_MIN_FREE_BYTES', 512 * MiB, 0, 1024 * GiB),
      maxKept: int('BROWSERD_REPLAY_MAX_KEPT', 100, 1, 100_000),
    },
    curl: {
      timeoutMs: int('BROWSERD_CURL_TIMEOUT_MS', 30_000, 100, 600_000),
      maxTimeoutMs: int('BROWSERD_CURL_MAX_TIMEOUT_MS', 300_000, 100, 3_600_000),
      maxBodyBytes: int('BROWSERD_CURL_MAX_BODY_BYTES', 16 * MiB, 0, 64 * MiB),
      maxResponseBytes: int('BROWSERD_CURL_MAX_RESPONSE_BYTES', 16 * MiB, 1024, 256 * MiB),
      maxRawResponseBytes: int('BROWSERD_CURL_RAW_MAX_RESPONSE_BYTES', 1 * GiB, 1024, 64 * GiB),
      maxConcurrent: int('BROWSERD_CURL_MAX_CONCURRENT', 8, 1, 256),
    },
    egress: {
      nftables: bool('BROWSERD_EGRESS_NFTABLES', true),
    },
    proxies: {
      checkUrls: parseCheckUrls(get('BROWSERD_PROXY_CHECK_URLS')),
      providers: parseProviders(get('BROWSERD_PROXY_PROVIDERS_FILE')),
      providersFile: get('BROWSERD_PROXY_PROVIDERS_FILE') ?? null,
      checkTimeoutMs: int('BROWSERD_PROXY_CHECK_TIMEOUT_MS', 10_000, 100, 600_000),
      maxConcurrentChecks: int('BROWSERD_MAX_PROXY_CHECKS', 8, 1, 1000),
      dialTimeoutMs: int('BROWSERD_PROXY_DIAL_TIMEOUT_MS', 15_000, 100, 600_000),
    },
    computer: {
      timeoutMs: int('BROWSERD_COMPUTER_TIMEOUT_MS', 30_000, 100, 600_000),
      maxWaitMs: int('BROWSERD_COMPUTER_MAX_WAIT_MS', 60_000, 0, 3_600_000),
      maxBatch: int('BROWSERD_COMPUTER_MAX_BATCH', 100, 1, 10_000),
      maxText: int('BROWSERD_COMPUTER_MAX_TEXT', 10_000, 1, 100_000),
    },
    playwright: {
      runners: int('BROWSERD_PLAYWRIGHT_RUNNERS', 2, 1, 32),
      executors: int('BROWSERD_PLAYWRIGHT_EXECUTORS', 8, 0, 64),
      outputLimitBytes: int('BROWSERD_PLAYWRIGHT_OUTPUT_LIMIT_BYTES', 1 * MiB, 1024, 64 * MiB),
      resultLimitBytes: int('BROWSERD_PLAYWRIGHT_RESULT_LIMIT_BYTES', 16 * MiB, 1024, 256 * MiB),
      maxHeapMb: int('BROWSERD_PLAYWRIGHT_MAX_HEAP_MB', 1024, 64, 65_536),
    },
    logs: {
      daemonLines: int('BROWSERD_LOG_DAEMON_LINES', 2000, 1, 1_000_000),
      chromiumLines: int('BROWSERD_LOG_CHROMIUM_LINES', 2000, 1, 1_000_000),
      fileBacklogBytes: int('BROWSERD_LOG_FILE_BACKLOG_BYTES', 64 * 1024, 0, 64 * MiB),
      maxStreams: int('BROWSERD_LOG_MAX_STREAMS', 32, 1, 10_000),
    },
    telemetry: {
      ringEvents: int('BROWSERD_TELEMETRY_RING', 1024, 1, 1_000_000),
      ringBytes: int('BROWSERD_TELEMETRY_RING_BYTES', 16 * MiB, 64 * 1024, 1024 * MiB),
      eventMaxBytes: int('BROWSERD_TELEMETRY_EVENT_MAX_BYTES', 64 * 1024, 4096, 16 * MiB),
      maxStreams: int('BROWSERD_TELEMETRY_MAX_STREAMS', 32, 1, 10_000),
    },
    webdriver: { chromedriver: resolveExecutable('BROWSERD_CHROMEDRIVER', get('BROWSERD_CHROMEDRIVER') ?? 'chromedriver', env, get('BROWSERD_CHROMEDRIVER') !== undefined), user: get('BROWSERD_WEBDRIVER_USER') ?? 'browserd-webdriver' },
    testHooks: parseTestHooks(get('BROWSERD_TEST_HOOKS')),
  };
}

/**
 * The agent user (BROWSERD_AGENT_USER): an existing user of /etc/passwd, not root; another user
 * than the daemon's needs a daemon that may switch users and setpriv(1). Its folder is prepared
 * (created, 0711) here.
 */
function loadAgent(name: string, stateDir: string, dir: string): Config['agent'] {
  const setting = 'BROWSERD_AGENT_USER';
  const user = lookupUser(name);
  if (user === null) {
    throw new ConfigError(setting, `no user "${name}" in /etc/passwd: create it (useradd --system --user-group --create-home --home-dir /var/lib/${name}-home --shell /usr/sbin/nologin ${name}; .ci/setup and systemd/install.sh do) or name another`);
  }
  if (user.uid === 0) throw new ConfigError(setting, `"${name}" is root (uid 0): the agent user must be an unprivileged user`);
  const me = daemonUser();
  const separated = user.uid !== me.uid;
  const maySwitch = maySwitchUsers();
  if (separated && !maySwitch) {
    throw new ConfigError(setting, `the daemon runs as uid ${me.uid} without CAP_SETUID and CAP_SETGID, so it cannot run processes as "${name}" (uid ${user.uid}): grant them (systemd/browserd.service) or set ${setting}=${me.name} (no separation)`);
  }
  if (separated && findSetpriv() === null) throw new ConfigError(setting, `setpriv(1) (util-linux), which starts processes as "${name}", is not on the daemon's PATH`);
  return { user, separated, maySwitch, dir: prepareAgentDir(dir, stateDir) };
}

export function parseListen(raw: string): { host: string; port: number } {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]]*)):(\d{1,5})$/.exec(raw);
  if (!m) throw new ConfigError('BROWSERD_LISTEN', `must be host:port (or [ipv6]:port, or :port), got "${raw}"`);
  const port = Number(m[3]);
  if (port > 65535) throw new ConfigError('BROWSERD_LISTEN', `port must be 0-65535, got ${port}`);
  const host = m[1] ?? (m[2] === '' ? '127.0.0.1' : (m[2] as string));
  return { host, port };
}

function parseExtraFlags(raw: string | undefined): string[] {
  if (raw === undefined) return [];
  let flags: string[];
  try {
    flags = splitFlags(raw);
  } catch (err) {
    throw new ConfigError('BROWSERD_CHROMIUM_FLAGS', (err as Error).message);
  }
  for (const flag of flags) {
    if (!flag.startsWith('--')) throw new ConfigError('BROWSERD_CHROMIUM_FLAGS', `"${flag}" is not a --flag`);
    const owned = ownedBy(flag, OWNED_FLAGS);
    if (owned) {
      throw new ConfigError('BROWSERD_CHROMIUM_FLAGS', `${flag.split('=')[0]} is owned by the daemon and may not be set here`);
    }
  }
  return flags;
}

function viewportSetting(raw: string | undefined): Viewport {
  if (raw === undefined) return DEFAULT_VIEWPORT;
  try {
    return parseViewport(raw);
  } catch (err) {
    throw new ConfigError('BROWSERD_VIEWPORT', (err as Error).message);
  }
}

/** An executable by path or PATH name; one that is missing is null, or a ConfigError when the setting named it. */
function resolveExecutable(setting: string, raw: string, env: Env, named: boolean): string | null {
  const file = raw.includes('/') ? path.resolve(raw) : findOnPath(raw, env.PATH ?? '') ?? findOnPath(raw, '/usr/bin:/usr/lib/chromium');
  if (file !== null && isExecutable(file)) return file;
  if (named) throw new ConfigError(setting, `"${raw}" is not an executable file`);
  return null;
}

function resolveChromium(raw: string | undefined, env: Env): string | null {
  if (raw !== undefined) {
    const file = raw.includes('/') ? path.resolve(raw) : findOnPath(raw, env.PATH ?? '');
    if (file === null || !isExecutable(file)) {
      throw new ConfigError('BROWSERD_CHROMIUM', `"${raw}" is not an executable file`);
    }
    return file;
  }
  if (isExecutable('/usr/lib/chromium/chromium')) return '/usr/lib/chromium/chromium';
  for (const name of ['chromium', 'chromium-browser', 'google-chrome']) {
    const file = findOnPath(name, env.PATH ?? '');
    if (file !== null) return file;
  }
  return null;
}

function parseBaseUrl(raw: string | undefined): string | null {
  if (raw === undefined) return null;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError('BROWSERD_BASE_URL', `"${raw}" is not a URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new ConfigError('BROWSERD_BASE_URL', `"${raw}" must be http or https`);
  if (url.search !== '' || url.hash !== '' || url.username !== '' || url.password !== '') {
    throw new ConfigError('BROWSERD_BASE_URL', `"${raw}" must have no query, fragment or credentials`);
  }
  return url.href.replace(/\/+$/, '');
}

function parseCheckUrls(raw: string | undefined): string[] {
  if (raw === undefined) return DEFAULT_CHECK_URLS;
  const urls = raw.split(/[,\s]+/).filter(Boolean);
  for (const u of urls) {
    let url: URL;
    try {
      url = new URL(u);
    } catch {
      throw new ConfigError('BROWSERD_PROXY_CHECK_URLS', `"${u}" is not a URL`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      throw new ConfigError('BROWSERD_PROXY_CHECK_URLS', `"${u}" must be http or https`);
    }
    if (url.port === '0') throw new ConfigError('BROWSERD_PROXY_CHECK_URLS', `"${u}" has port 0`);
  }
  if (urls.length === 0) throw new ConfigError('BROWSERD_PROXY_CHECK_URLS', 'names no URL');
  return urls;
}
