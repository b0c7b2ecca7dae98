// Fixture of test/proxies/store.test.ts, run as its own process: opens the proxy store in
// argv[2] and rewrites it in a loop, generation after generation, until it is killed. Each
// generation is a whole set of proxies named after it; `done <round>.<n>` is printed once a
// generation's write has resolved, `start <generation or none>` once the store was opened.
import { createLogger } from '../../../daemon/core/log.js';
import { ProxyStore, type StoredProxy } from '../../../daemon/proxies/store/store.js';

export const RECORDS_PER_GENERATION = 40;

export function generation(gen: string): StoredProxy[] {
  const records: StoredProxy[] = [];
  for (let i = 0; i < RECORDS_PER_GENERATION; i++) {
    records.push({
      id: `proxy-${i}`,
      name: `gen-${gen}`,
      type: 'custom',
      protocol: 'http',
      // Padding makes each write large enough to be caught in the middle.
      config: { host: '127.0.0.1', port: 3128, username: 'u', password: 'p'.repeat(200), ca_bundle: `${gen}-`.repeat(200) },
      project: null,
      created_at: '2026-01-01T00:00:00.000Z',
    });
  }
  return records;
}

async function main(): Promise<void> {
  const [dir, round] = process.argv.slice(2) as [string, string];
  const store = ProxyStore.open(dir, createLogger('silent'));
  process.stdout.write(`start ${store.list()[0]?.name?.slice(4) ?? 'none'}\n`);
  for (let n = 1; ; n++) {
    const gen = `${round}.${n}`;
    await store.mutate(() => ({ next: generation(gen), result: undefined }));
    process.stdout.write(`done ${gen}\n`);
  }
}

if (process.argv[1]?.endsWith('/proxies/store-writer.js')) await main();
