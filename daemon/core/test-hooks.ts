// BROWSERD_TEST_HOOKS, as the shipped daemon has it: none. The test suite's daemon is a build of its
// own (scripts/bundle.mjs, dist/daemon/browserd-test.js) in which this module is replaced by
// test/kit/test-hooks.ts, whose hooks redirect DNS and direct connections and load another terminal
// module. This build refuses the setting at start (a bad setting, exit 2): a daemon that ignored it
// silently would make a test pass against the wrong build, and one that honoured it would let
// whoever sets its environment point its checks and connections elsewhere.
import { ConfigError } from './config-error.js';

/** What the daemon asks of the hooks; in this build every answer is "no hook". */
export interface TestHooks {
  /** The names set (logged at start). */
  readonly names: readonly string[];
  /** Host names (lower case) answered with these addresses instead of DNS. */
  readonly resolveTable: ReadonlyMap<string, string[]>;
  /** `ip:port` of the DNS server used instead of the system's. */
  readonly dnsServer: string | undefined;
  /** Direct url checks go to 127.0.0.1:<port>. */
  readonly directToPort: number | undefined;
  /** The module loaded as the terminal implementation. */
  readonly ptyPackage: string | undefined;
  /** true when a live activation of extension `name` must fail as if it timed out. */
  failLiveActivation(name: string): boolean;
  /** true when the verification of an extension named by any of `subjects` must never succeed. */
  failActivation(...subjects: string[]): boolean;
  /** Holds an install of any of `names` until the test lets go (resolves at once when none is held). */
  holdActivation(extensionsDir: string, names: string[], log: { info(obj: object, msg: string): void }): Promise<void>;
  /** The uid the forwarding proxy serves instead of the agent user's (the suite's own clients run as root); undefined: none. */
  readonly forwarderUid: number | undefined;
  /** The last ready hook of every launch, holding it until the test lets go (a test kills Chromium inside that window); undefined: none. */
  readonly holdReady: ((pid: number, log: { info(obj: object, msg: string): void }) => Promise<void>) | undefined;
  /** Every JSON answer is checked against its route's doc.responses (the test build: always). */
  readonly checkAnswers: boolean;
  /** Runs once the daemon listens: the faults a test of the crash policy asks for (a stray rejection, an uncaught exception). */
  afterListening(): void;
}

const NONE: TestHooks = {
  names: [],
  resolveTable: new Map(),
  dnsServer: undefined,
  directToPort: undefined,
  ptyPackage: undefined,
  failLiveActivation: () => false,
  failActivation: () => false,
  holdActivation: async () => {},
  holdReady: undefined,
  forwarderUid: undefined,
  checkAnswers: false,
  afterListening: () => {},
};

/** BROWSERD_TEST_HOOKS (undefined: not set): this build has no hooks, so any value is a bad setting. */
export function parseTestHooks(raw: string | undefined): TestHooks {
  if (raw !== undefined) {
    throw new ConfigError('BROWSERD_TEST_HOOKS', 'this daemon is the production build, which has no test hooks: unset it (the test suite runs dist/daemon/browserd-test.js)');
  }
  return NONE;
}
