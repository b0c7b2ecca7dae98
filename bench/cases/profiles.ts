// 16. Profiles: the save and the load of a realistic Chromium profile (a daemon's browser after
// visiting a few heavy loopback pages: 2 MiB scripts, images, localStorage and IndexedDB writes,
// then a graceful stop so that everything is flushed) by the profiles module's own tar + zstd
// (packProfile: caches and locks left out; unpackProfile: every check of the safe unpack) vs GNU
// `tar --zstd` of the same folder (everything in it, no checks).
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, rmSync, statSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import puppeteer from 'puppeteer-core';
import { profileDirOf } from '../../daemon/chromium/sweep/profile.js';
import { packProfile, unpackProfile } from '../../daemon/profiles/archive.js';
import { tempDir } from '../../test/kit/cleanup.js';
import { startDaemon, TEST_TOKEN } from '../daemon.js';
import { median, notInstalled, progress, skippedRow, timed, which, type Bench, type Row } from '../lib.js';

const N = 5;
const PAGES = 6;
const run = promisify(execFile);
const PEER = 'GNU `tar --zstd` of the same folder (everything, no checks)';

async function realisticProfile(): Promise<{ dir: string; stop: () => Promise<void> }> {
  const script = `/*${randomBytes(1024 * 1024).toString('base64')}*/ void 0;`;
  const image = randomBytes(512 * 1024);
  const origin = http.createServer((req, res) => {
    const u = req.url ?? '/';
    if (u.startsWith('/s')) return void res.writeHead(200, { 'content-type': 'text/javascript', 'cache-control': 'max-age=3600' }).end(script);
    if (u.startsWith('/i')) return void res.writeHead(200, { 'content-type': 'image/png', 'cache-control': 'max-age=3600' }).end(image);
    res.writeHead(200, { 'content-type': 'text/html', 'set-cookie': `v${u.length}=${'x'.repeat(200)}; Max-Age=3600` });
    res.end(`<script src="/s${u}"></script><img src="/i${u}"><script>
      for (let i = 0; i < 50; i++) localStorage.setItem('k' + i + location.pathname, 'v'.repeat(2000));
      const r = indexedDB.open('db', 1);
      r.onupgradeneeded = () => r.result.createObjectStore('s');
      r.onsuccess = () => { const t = r.result.transaction('s', 'readwrite'); for (let i = 0; i < 200; i++) t.objectStore('s').put('w'.repeat(1000), location.pathname + i); };
    </script>`);
  });
  await new Promise<void>((resolve) => origin.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(origin.address() as AddressInfo).port}`;
  const d = await startDaemon({ autostart: true });
  const b = await puppeteer.connect({ browserURL: `${d.url}/browsers/local/cdp`, headers: { authorization: `Bearer ${TEST_TOKEN}` } });
  const page = await b.newPage();
  for (let i = 0; i < PAGES; i++) {
    await page.goto(`${base}/p${i}`, { waitUntil: 'load' });
    await page.waitForFunction('localStorage.length >= 50');
  }
  await b.disconnect();
  await d.stop(); // graceful: Chromium flushes its stores
  await new Promise<void>((resolve) => origin.close(() => resolve()));
  return { dir: profileDirOf(d.agentDir), stop: () => d.cleanup() }; // the profile is on the agent's side (issue 23)
}

function du(dir: string): Promise<number> {
  return run('du', ['-sb', dir]).then((r) => Number(r.stdout.split('\t')[0]));
}

export async function benchProfiles(): Promise<Row[]> {
  const SAVE = '16. profile save (archive of the user data), p50';
  const LOAD = '16. profile load (unpack into an empty folder), p50';
  if (which('zstd') === null) return [skippedRow(SAVE, 'ms', PEER, notInstalled('zstd')), skippedRow(LOAD, 'ms', PEER, notInstalled('zstd'))];
  const profile = await realisticProfile();
  const work = tempDir('browserd-bench-profiles-');
  try {
    const size = await du(profile.dir);
    const save: number[] = [];
    const tarSave: number[] = [];
    const load: number[] = [];
    const tarLoad: number[] = [];
    let ours = 0;
    let theirs = 0;
    for (let i = 0; i <= N; i++) {
      const a = path.join(work, `ours-${i}.tar.zst`);
      const b = path.join(work, `theirs-${i}.tar.zst`);
      const s = await timed(() => packProfile(profile.dir, a));
      const t = await timed(() => run('tar', ['--zstd', '-cf', b, '-C', profile.dir, '.']));
      ours = statSync(a).size;
      theirs = statSync(b).size;
      const da = path.join(work, `ua-${i}`);
      const db = path.join(work, `ub-${i}`);
      mkdirSync(da);
      mkdirSync(db);
      const l = await timed(() => unpackProfile(a, da, { maxEntries: 200_000, maxUnpackedBytes: 8 * 1024 ** 3 }));
      const m = await timed(() => run('tar', ['--zstd', '-xf', b, '-C', db]));
      for (const p of [a, b, da, db]) rmSync(p, { recursive: true, force: true });
      if (i === 0) continue; // warm-up
      save.push(s.ms);
      tarSave.push(t.ms);
      load.push(l.ms);
      tarLoad.push(m.ms);
    }
    const mib = (n: number): string => `${(n / 2 ** 20).toFixed(1)} MiB`;
    const note = `profile folder ${mib(size)} after ${PAGES} heavy pages; browserd's archive ${mib(ours)} (caches and locks left out), tar's ${mib(theirs)}; N=${N} each, interleaved`;
    progress(`profiles: ${note}`);
    progress(`profiles: save ${median(save).toFixed(0)} ms vs tar ${median(tarSave).toFixed(0)} ms; load ${median(load).toFixed(0)} ms vs tar ${median(tarLoad).toFixed(0)} ms`);
    return [
      { name: SAVE, unit: 'ms', browserd: median(save), peer: median(tarSave), peerName: PEER, note },
      { name: LOAD, unit: 'ms', browserd: median(load), peer: median(tarLoad), peerName: PEER, note },
    ];
  } finally {
    rmSync(work, { recursive: true, force: true });
    await profile.stop();
  }
}

export const profilesBench: Bench = { name: 'profiles', what: '16. profile save and load vs tar --zstd of the same folder', run: benchProfiles };
