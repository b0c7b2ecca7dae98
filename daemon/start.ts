// The daemon's entry: Node's compile cache first (daemon/core/compile-cache.ts), then the daemon
// itself, so that its code is read from the cache when one is there. The bundle keeps this file
// apart (scripts/bundle.mjs: dist/daemon/browserd.js imports dist/daemon/browserd-main.js).
import { enableFromSettings } from './core/compile-cache.js';

enableFromSettings(process.env);
await import('./main.js');
