// What the daemon's settings are, once read and checked (config.ts reads them from the environment):
// one field per setting, each named with its BROWSERD_ variable and what it means.
import type { ManagedProxyType, ProxyGateway } from './proxy-providers.js';
import type { TestHooks } from './test-hooks.js';
import type { UserEntry } from './users.js';
import type { Viewport } from './viewport.js';

export interface Config {
  listen: { host: string; port: number };
  /** The daemon's side: its secrets and records (0700, the daemon's uid). */
  stateDir: string;
  /** The agent's side (docs/security.md): who runs Chromium and every process of the API, and its folder. */
  agent: {
    /** BROWSERD_AGENT_USER: never root. */
    user: UserEntry;
    /** false when the agent user is the daemon's own (no separation: a warning at start). */
    separated: boolean;
    /** Whether the daemon may start children as other users (root, or CAP_SETUID and CAP_SETGID). */
    maySwitch: boolean;
    /** BROWSERD_AGENT_DIR (the daemon's, 0711): Chromium's profile and TMPDIR (the agent user's), installed extensions. */
    dir: string;
  };
  sessionId: string;
  projectId: string | null;
  token: string | null;
  keysFile: string | null;
  /** Session tokens (JWTs): the control plane's public keys, the audience, the life of the daemon's own. */
  jwt: { keysFile: string | null; audience: string; ttlSec: number };
  /** BROWSERD_BASE_URL: the daemon's URL as callers reach it (else the Host of each request). */
  baseUrl: string | null;
  logLevel: string;
  http: {
    bodyLimitBytes: number;
    shutdownTimeoutMs: number;
    idempotencyMaxKeys: number;
    idempotencyMaxBytes: number;
    /** BROWSERD_REQUEST_IDLE_TIMEOUT_MS: a request's headers must all arrive within it, and its body may not pause longer. */
    requestIdleTimeoutMs: number;
    /** BROWSERD_SSE_STALL_MS: an event stream's reader that takes none of a write for this long is told and dropped (core/streams/sse.ts). */
    sseStallMs: number;
  };
  chromium: {
    /** null when no binary was found on the default paths; the browser then reports `failed`. */
    binary: string | null;
    extraFlags: string[];
    headless: boolean;
    /** The viewport every window and tab gets until PATCH /browsers/{id} changes it (BROWSERD_VIEWPORT). */
    viewport: Viewport;
    policyDir: string;
    autostart: boolean;
    readyTimeoutMs: number;
    stopGraceMs: number;
    crashLoopMax: number;
    crashLoopWindowMs: number;
    backoffInitialMs: number;
    backoffMaxMs: number;
    cdpMaxMessageBytes: number;
    /** Unsent bytes one CDP client may hold before a message; past it the client is closed (1013). */
    cdpClientQueueBytes: number;
    /** Unsent bytes over every CDP client before a message; past it the one holding most is closed (1013). */
    cdpQueueTotalBytes: number;
    /** Chromium's TMPDIR, in the agent dir (emptied after every stop). */
    tmpDir: string;
    /** BROWSERD_CHROMIUM_SANDBOX=false: --no-sandbox, a warning at every launch. */
    sandbox: boolean;
  };
  processes: {
    maxLive: number;
    retentionMs: number;
    replayBufferBytes: number;
    execOutputLimitBytes: number;
    /** The output every running exec keeps, together; past it output is counted as truncated. */
    execOutputTotalBytes: number;
    /** The output buffers of exited processes kept for reading, together; past it the oldest is forgotten. */
    outputRetainedBytes: number;
    stdinLimitBytes: number;
    stdinTimeoutMs: number;
    /** Stdin bytes queued over every process (each process's own cap is 4 × stdinLimitBytes). */
    stdinQueueTotalBytes: number;
  };
  extensions: {
    maxItems: number;
    maxArchiveBytes: number;
    maxRequestBytes: number;
    maxEntries: number;
    maxUnpackedBytes: number;
    maxConcurrentUploads: number;
    activationTimeoutMs: number;
  };
  replays: {
    /** The ffmpeg binary (BROWSERD_FFMPEG). */
    ffmpeg: string;
    defaultFramerate: number;
    maxFramerate: number;
    maxActive: number;
    maxDurationSec: number;
    maxBytes: number;
    minFreeBytes: number;
    maxKept: number;
  };
  fs: {
    /** Where Chromium saves downloads (Browser.setDownloadBehavior); never inside stateDir (the files module creates it). */
    downloadsDir: string;
    /** Downloads listed (GET …/fs/downloads); past it the oldest finished ones go, with their files in downloadsDir. */
    downloadsMaxCount: number;
    /** Bytes of finished downloads kept in downloadsDir; past it the oldest go. */
    downloadsMaxBytes: number;
    maxFileBytes: number;
    maxUploadBytes: number;
    maxUploadFiles: number;
    maxZipBytes: number;
    maxZipEntries: number;
    maxUnpackedBytes: number;
    maxListEntries: number;
    maxWatches: number;
    watchQueue: number;
    watchMaxDirs: number;
    watchIdleMs: number;
  };
  curl: {
    /** A request's deadline when it names none (timeout_ms), and the most it may name. */
    timeoutMs: number;
    maxTimeoutMs: number;
    /** The request body one /curl or /curl/raw request may send. */
    maxBodyBytes: number;
    /** The answer /curl returns in JSON (buffered), and the most /curl/raw streams. */
    maxResponseBytes: number;
    maxRawResponseBytes: number;
    /** Requests through the browser at once (each a hidden tab). */
    maxConcurrent: number;
  };
  egress: {
    /** BROWSERD_EGRESS_NFTABLES: install nftables rules for the agent's uid while the egress policy is filtered (docs/egress.md). */
    nftables: boolean;
  };
  proxies: {
    checkUrls: string[];
    providers: Partial<Record<ManagedProxyType, ProxyGateway>>;
    /** The file the providers came from (the files API never reaches it). */
    providersFile: string | null;
    checkTimeoutMs: number;
    maxConcurrentChecks: number;
    /** The forwarding proxy: connect, TLS and CONNECT answer of one upstream (or direct) connection. */
    dialTimeoutMs: number;
  };
  computer: {
    /** The browser's share of one computer request's deadline (its own waits come on top). */
    timeoutMs: number;
    /** The waits (delays, durations, sleeps) one computer request may ask for, summed. */
    maxWaitMs: number;
    /** Actions in one batch. */
    maxBatch: number;
    /** Characters typed, or written to the clipboard, by one request. */
    maxText: number;
  };
  playwright: {
    /** Runner processes at most (one execution at a time each). */
    runners: number;
    /** Named executors at most, beyond `default` (one runner and one tab each). */
    executors: number;
    /** stdout and stderr kept per execution, each. */
    outputLimitBytes: number;
    /** The JSON of an execution's result, at most. */
    resultLimitBytes: number;
    /** The runner's V8 heap limit (--max-old-space-size). */
    maxHeapMb: number;
  };
  logs: {
    /** Recent lines of the daemon's own log kept for new readers. */
    daemonLines: number;
    /** Recent lines of Chromium's output kept for new readers. */
    chromiumLines: number;
    /** How much of a file's end a `path` stream starts with. */
    fileBacklogBytes: number;
    /** Log streams open at once. */
    maxStreams: number;
  };
  telemetry: {
    /** Events the ring keeps at most (BROWSERD_TELEMETRY_RING). */
    ringEvents: number;
    /** Bytes of event JSON the ring keeps at most. */
    ringBytes: number;
    /** One event's JSON at most (past it, its data is dropped: truncated). */
    eventMaxBytes: number;
    /** Telemetry streams open at once. */
    maxStreams: number;
  };
  /** WebDriver (docs/webdriver.md): ChromeDriver, run by the daemon on first use. */
  webdriver: {
    /** BROWSERD_CHROMEDRIVER: its binary (default chromedriver on PATH); null: not installed (the routes answer 503 dependency_missing). */
    chromedriver: string | null;
    /** BROWSERD_WEBDRIVER_USER (default browserd-webdriver): the user ChromeDriver runs as, neither root nor the agent user. */
    user: string;
  };
  /** BROWSERD_TEST_HOOKS: only the test build has them (test-hooks.ts); the production build refuses the setting. */
  testHooks: TestHooks;
}
