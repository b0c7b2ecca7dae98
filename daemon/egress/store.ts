// The egress policy kept in `<stateDir>/egress-policy.json`, read once at start, each change
// written atomically (core/fs-atomic.ts) before it takes effect. A file that cannot be read as a
// policy fails closed: it is set aside, the daemon starts with a filtered policy that allows no
// host, and says so in the log (the operator PUTs a policy again).
import { readFileSync, renameSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { lazy } from '../core/lazy.js';
import { writeFileAtomic } from '../core/fs-atomic.js';
import type { Logger } from '../core/log.js';
import { DEFAULT_POLICY, type EgressPolicy } from './policy.js';

export const POLICY_STORE_FILE = 'egress-policy.json';
const VERSION = 1;

const fileSchema = lazy(() => z.object({
  version: z.literal(VERSION),
  filtered: z.boolean(),
  allowed_hosts: z.array(z.string()),
  allow_private: z.array(z.string()),
  blocked_hosts: z.array(z.string()),
}));

/** What a broken file becomes: filtered, nothing allowed. */
const CLOSED: EgressPolicy = { filtered: true, allowed_hosts: [], allow_private: [], blocked_hosts: [] };

export class PolicyStore {
  private writing: Promise<void> = Promise.resolve();

  private constructor(
    private readonly file: string,
    private current: EgressPolicy,
  ) {}

  static open(stateDir: string, log: Logger): PolicyStore {
    const file = path.join(stateDir, POLICY_STORE_FILE);
    let text: string | null = null;
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    if (text === null) return new PolicyStore(file, DEFAULT_POLICY);
    let parsed: z.ZodSafeParseResult<z.infer<ReturnType<typeof fileSchema>>> | null;
    try {
      parsed = fileSchema().safeParse(JSON.parse(text));
    } catch {
      parsed = null;
    }
    if (parsed?.success === true) {
      const { version: _v, ...policy } = parsed.data;
      return new PolicyStore(file, policy);
    }
    const aside = `${file}.broken-${Date.now()}`;
    renameSync(file, aside);
    log.error({ event: 'egress_policy_broken', file, moved_to: aside }, 'the egress policy file could not be read: set aside; filtering with no host allowed until a policy is PUT');
    return new PolicyStore(file, CLOSED);
  }

  get(): EgressPolicy {
    return this.current;
  }

  /** Writes `next` (one write at a time), then makes it current. */
  set(next: EgressPolicy): Promise<void> {
    const run = this.writing.then(async () => {
      await writeFileAtomic(this.file, `${JSON.stringify({ version: VERSION, ...next }, null, 2)}\n`, 0o600);
      this.current = next;
    });
    this.writing = run.catch(() => undefined);
    return run;
  }

  idle(): Promise<void> {
    return this.writing;
  }
}
