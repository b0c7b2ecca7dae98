// 5. Unzip: a ~20 MiB archive of 2,000 files (an extension: manifest.json at the root, the rest in
// 20 folders, deflated text that compresses like minified code), generated once, unpacked by the
// extensions module's safe unzip (yauzl, every check on) vs Info-ZIP `unzip -q` into an empty folder.
import { execFile } from 'node:child_process';
import { mkdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { safeUnzip } from '../../daemon/core/zip/unzip.js';
import { buildZip, type ZipEntry } from '../../test/helpers/zip.js';
import { tempDir } from '../../test/kit/cleanup.js';
import { FILES, median, notInstalled, progress, roundSpread, samples, skippedRow, textFiles, timed, which, type Bench, type Row } from '../lib.js';

const N = samples(5);
const NAME = '5. unzip 20 MiB / 2,000 files, p50';
const PEER = 'Info-ZIP `unzip -q` of the same archive into an empty folder';
const run = promisify(execFile);

function archive(dir: string): { file: string; bytes: number; unpacked: number } {
  const entries: ZipEntry[] = [{ name: 'manifest.json', data: JSON.stringify({ manifest_version: 3, name: 'bench: big', version: '1.0.0' }) }];
  // The corpus with manifest.json in place of its first file: FILES entries.
  for (const f of textFiles().slice(1)) entries.push({ ...f, method: 'deflate' });
  const unpacked = entries.reduce((n, e) => n + (e.data?.length ?? 0), 0);
  const file = path.join(dir, 'big.zip');
  writeFileSync(file, buildZip(entries));
  return { file, bytes: statSync(file).size, unpacked };
}

export async function benchUnzip(): Promise<Row[]> {
  const unzip = which('unzip');
  if (unzip === null) return [skippedRow(NAME, 'ms', PEER, notInstalled('unzip'))];
  const dir = tempDir('browserd-bench-unzip-');
  const zip = archive(dir);
  progress(`unzip: archive of ${(zip.bytes / 2 ** 20).toFixed(1)} MiB, ${FILES} files, ${(zip.unpacked / 2 ** 20).toFixed(1)} MiB unpacked`);
  const ours: number[] = [];
  const theirs: number[] = [];
  const cpu: number[] = [];
  for (let i = 0; i <= N; i++) {
    const a = path.join(dir, `ours-${i}`);
    const b = path.join(dir, `theirs-${i}`);
    mkdirSync(a);
    mkdirSync(b);
    const c0 = process.cpuUsage();
    const r = await timed(() => safeUnzip(zip.file, a, { maxEntries: 10_000, maxUnpackedBytes: 200 * 2 ** 20 }));
    const c = process.cpuUsage(c0);
    if (r.value.entries !== FILES) throw new Error(`safeUnzip unpacked ${r.value.entries} entries`);
    const u = await timed(() => run(unzip, ['-q', zip.file, '-d', b]));
    rmSync(a, { recursive: true, force: true });
    rmSync(b, { recursive: true, force: true });
    if (i === 0) continue; // warm-up
    ours.push(r.ms);
    cpu.push((c.user + c.system) / 1000);
    theirs.push(u.ms);
  }
  progress(`unzip: browserd ${median(ours).toFixed(0)} ms, Info-ZIP ${median(theirs).toFixed(0)} ms`);
  return [
    {
      name: NAME,
      unit: 'ms',
      browserd: median(ours),
      peer: median(theirs),
      peerName: PEER,
      note: `the extensions module's safeUnzip (names, kinds, sizes and CRCs checked); archive ${(zip.bytes / 2 ** 20).toFixed(1)} MiB, ${(zip.unpacked / 2 ** 20).toFixed(1)} MiB unpacked; N=${N} each, interleaved; ${roundSpread(ours, theirs)}; safeUnzip's CPU (this process, its thread pool included) p50 ${median(cpu).toFixed(0)} ms; target ≤ 1.2× (issue 43)`,
    },
  ];
}

export const unzipBench: Bench = { name: 'unzip', what: '5. unzip of a 20 MiB, 2,000-file archive vs Info-ZIP unzip', run: benchUnzip };
