// The telemetry stream as a test reads it: through the SDK (replay all), every envelope pushed to a
// list as it comes; abort the returned controller to stop.
import type { Daemon } from '../kit/daemon.js';
import { kernel } from './fs.js';

export interface Envelope {
  seq: number;
  event: { type: string; data?: Record<string, unknown> };
}

export async function collectTelemetry(d: Daemon, into: Envelope[]): Promise<AbortController> {
  const collector = new AbortController();
  const stream = await kernel(d).browsers.telemetry.stream('local', { replay: 'all' }, { signal: collector.signal });
  void (async () => {
    try {
      for await (const e of stream) into.push(e as unknown as Envelope);
    } catch {
      // aborted at the end
    }
  })();
  return collector;
}
