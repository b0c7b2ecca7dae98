// download_dir_zstd: a folder as a tar.zst built while it is sent, from the same plan as
// download_dir_zip (zip-download.ts: the walk through folder handles, the entry limit before any
// byte, each file opened and checked again, the same files left out). The tar is the daemon's own
// (core/zip/tar.ts), compressed with zstd by Node's zlib.
import { Readable } from 'node:stream';
import zlib from 'node:zlib';
import { entryHeaders, padding, tarEnd } from '../../core/zip/tar.js';
import type { Guard } from '../paths/guard.js';
import { archiveLeavesOut, openPlannedFile, type ZipPlan } from './zip-download.js';

const CHUNK = 256 * 1024;
/** zstd level 3 (zstd's default). */
const LEVEL = 3;

/** The tar of the planned tree (files that changed since the walk are left out); `files()` counts those written. */
export function tarSource(guard: Guard, plan: ZipPlan): { source: Readable; files: () => number } {
  const isProtected = archiveLeavesOut(guard);
  let files = 0;
  async function* gen(): AsyncGenerator<Buffer> {
    for (const entry of plan.entries) {
      if (entry.kind === 'dir') {
        yield* entryHeaders(entry.rel, 0, '5', entry.mtime.getTime());
        continue;
      }
      const opened = await openPlannedFile(isProtected, entry);
      if (opened === null) continue;
      const { fh, st } = opened;
      try {
        yield* entryHeaders(entry.rel, st.size, '0', st.mtimeMs);
        let pos = 0;
        while (pos < st.size) {
          const buf = Buffer.alloc(Math.min(CHUNK, st.size - pos));
          const { bytesRead } = await fh.read(buf, 0, buf.length, pos);
          // A file that shrank meanwhile: its declared size is kept (zeros), so the archive stays readable.
          if (bytesRead === 0) {
            yield Buffer.alloc(st.size - pos);
            break;
          }
          pos += bytesRead;
          yield buf.subarray(0, bytesRead);
        }
        yield padding(st.size);
        files++;
      } finally {
        await fh.close().catch(() => undefined);
      }
    }
    yield tarEnd();
  }
  return { source: Readable.from(gen()), files: () => files };
}

export function zstdCompressor(): zlib.ZstdCompress {
  return zlib.createZstdCompress({ params: { [zlib.constants.ZSTD_c_compressionLevel]: LEVEL } });
}
