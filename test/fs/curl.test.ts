// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// Every files route through curl, the other real client: raw bodies (-T, --data-binary), Range,
// HEAD, multipart as curl writes it (-F, in the Go clients' `files.dest_path` encoding too, and a
// file before its destination), JSON bodies, Server-Sent Events with -N.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { safeUnzip } from '../../daemon/core/zip/unzip.js';
import { curl, json } from '../helpers/fs.js';
import { buildZip } from '../helpers/zip.js';
import { AGENT_USER, agentIds, agentScratchDirs, giveToAgent } from '../kit/agent.js';
import { TEST_TOKEN, startDaemon, type Daemon } from '../kit/daemon.js';

let d: Daemon;
const scratch = agentScratchDirs('browserd-fs-curl-');
const F = '/browsers/local/fs';
const q = (p: string): string => `?path=${encodeURIComponent(p)}`;
const put = (body: unknown): string[] => ['-X', 'PUT', '-H', 'content-type: application/json', '--data-binary', JSON.stringify(body)];

before(async () => {
  d = await startDaemon();
});
after(() => d.cleanup());

test('write_file (-T and --data-binary), read_file, Range, HEAD, 416', async () => {
  const dir = scratch();
  const src = path.join(dir, 'src.bin');
  const content = Buffer.from(Array.from({ length: 1000 }, (_, i) => i % 251));
  writeFileSync(src, content);
  const file = path.join(dir, 'copy.bin');
  const w = await curl(d, `${F}/write_file${q(file)}&mode=640`, ['-T', src]);
  assert.equal(w.status, 204, w.body.toString());
  assert.deepEqual(readFileSync(file), content);
  assert.equal(statSync(file).mode & 0o777, 0o640);
  const w2 = await curl(d, `${F}/write_file${q(path.join(dir, 'text.txt'))}`, ['-X', 'PUT', '-H', 'content-type: text/plain', '--data-binary', 'plain text']);
  assert.equal(w2.status, 204);
  assert.equal(readFileSync(path.join(dir, 'text.txt'), 'utf8'), 'plain text');

  const r = await curl(d, `${F}/read_file${q(file)}`);
  assert.equal(r.status, 200);
  assert.deepEqual(r.body, content);
  assert.equal(r.headers['content-length'], '1000');
  assert.equal(r.headers['accept-ranges'], 'bytes');
  assert.equal(r.headers['content-type'], 'application/octet-stream');

  const cases: [string, number, number, number][] = [
    ['bytes=10-19', 206, 10, 19],
    ['bytes=990-', 206, 990, 999],
    ['bytes=-5', 206, 995, 999],
    ['bytes=995-5000', 206, 995, 999],
  ];
  for (const [range, status, a, b] of cases) {
    const res = await curl(d, `${F}/read_file${q(file)}`, ['-H', `Range: ${range}`]);
    assert.equal(res.status, status, range);
    assert.deepEqual(res.body, content.subarray(a, b + 1), range);
    assert.equal(res.headers['content-range'], `bytes ${a}-${b}/1000`, range);
  }
  const several = await curl(d, `${F}/read_file${q(file)}`, ['-H', 'Range: bytes=0-1,5-6']);
  assert.equal(several.status, 200, 'several ranges: the whole file');
  assert.equal(several.body.length, 1000);
  const past = await curl(d, `${F}/read_file${q(file)}`, ['-H', 'Range: bytes=1000-']);
  assert.equal(past.status, 416);
  assert.equal(past.headers['content-range'], 'bytes */1000');
  assert.equal(json(past).code, 'range_not_satisfiable');

  const head = await curl(d, `${F}/read_file${q(file)}`, ['-I']);
  assert.equal(head.status, 200);
  assert.equal(head.headers['content-length'], '1000');
  assert.ok(!head.body.includes(content.subarray(0, 64)), 'HEAD sends no content (curl -I prints only the headers)');
});

test('list_files, file_info, create_directory, move, set_file_permissions, delete_file, delete_directory', async () => {
  const dir = scratch();
  assert.equal((await curl(d, `${F}/create_directory`, put({ path: path.join(dir, 'a', 'b'), mode: '700' }))).status, 204);
  assert.equal(statSync(path.join(dir, 'a', 'b')).mode & 0o777, 0o700);
  writeFileSync(path.join(dir, 'a', 'f.txt'), 'hello');
  giveToAgent(path.join(dir, 'a', 'f.txt')); // the API acts as the agent user: chmod and chown of its own files only
  const list = json(await curl(d, `${F}/list_files${q(path.join(dir, 'a'))}`)) as unknown as { name: string; is_dir: boolean }[];
  assert.deepEqual(list.map((e) => [e.name, e.is_dir]), [['b', true], ['f.txt', false]]);
  const info = json(await curl(d, `${F}/file_info${q(path.join(dir, 'a', 'f.txt'))}`));
  assert.equal(info.size_bytes, 5);

  assert.equal((await curl(d, `${F}/move`, put({ src_path: path.join(dir, 'a', 'f.txt'), dest_path: path.join(dir, 'a', 'b', 'g.txt') }))).status, 204);
  assert.equal(readFileSync(path.join(dir, 'a', 'b', 'g.txt'), 'utf8'), 'hello');
  assert.equal((await curl(d, `${F}/set_file_permissions`, put({ path: path.join(dir, 'a', 'b', 'g.txt'), mode: '600', owner: AGENT_USER }))).status, 204);
  assert.equal(statSync(path.join(dir, 'a', 'b', 'g.txt')).mode & 0o777, 0o600);
  assert.equal(statSync(path.join(dir, 'a', 'b', 'g.txt')).uid, agentIds().uid);

  const setuid = await curl(d, `${F}/set_file_permissions`, put({ path: path.join(dir, 'a', 'b', 'g.txt'), mode: '4755' }));
  assert.equal(setuid.status, 400);
  const notDir = await curl(d, `${F}/delete_directory`, put({ path: path.join(dir, 'a', 'b', 'g.txt') }));
  assert.equal(json(notDir).code, 'not_a_directory');
  assert.equal((await curl(d, `${F}/delete_file`, put({ path: path.join(dir, 'a', 'b', 'g.txt') }))).status, 204);
  assert.equal((await curl(d, `${F}/delete_directory`, put({ path: path.join(dir, 'a') }))).status, 204);
  assert.equal(existsSync(path.join(dir, 'a')), false);
  const missing = await curl(d, `${F}/file_info${q(path.join(dir, 'a'))}`);
  assert.equal(missing.status, 404);
});

test('upload: Go encoding (files.dest_path), TypeScript encoding (files[][…]), a file before its destination', async () => {
  const dir = scratch();
  const a = path.join(dir, 'a.txt');
  const b = path.join(dir, 'b.txt');
  writeFileSync(a, 'AAA');
  writeFileSync(b, 'BBB');
  const go = await curl(d, `${F}/upload`, ['-F', `files.dest_path=${dir}/go/1.txt`, '-F', `files.file=@${a}`, '-F', `files.dest_path=${dir}/go/2.txt`, '-F', `files.file=@${b}`]);
  assert.equal(go.status, 204, go.body.toString());
  assert.equal(readFileSync(path.join(dir, 'go', '1.txt'), 'utf8'), 'AAA');
  assert.equal(readFileSync(path.join(dir, 'go', '2.txt'), 'utf8'), 'BBB');
  const ts = await curl(d, `${F}/upload`, ['-F', `files[][dest_path]=${dir}/ts/1.txt`, '-F', `files[][file]=@${a}`]);
  assert.equal(ts.status, 204, ts.body.toString());
  assert.equal(readFileSync(path.join(dir, 'ts', '1.txt'), 'utf8'), 'AAA');
  const reversed = await curl(d, `${F}/upload`, ['-F', `files[0][file]=@${b}`, '-F', `files[0][dest_path]=${dir}/rev/x.txt`]);
  assert.equal(reversed.status, 204, reversed.body.toString());
  assert.equal(readFileSync(path.join(dir, 'rev', 'x.txt'), 'utf8'), 'BBB');
  assert.deepEqual(readdirSync(path.join(d.stateDir, 'fs-spool')), [], 'the spool is empty again');

  const unpaired = await curl(d, `${F}/upload`, ['-F', `files[0][dest_path]=${dir}/lonely.txt`]);
  assert.equal(unpaired.status, 400);
  assert.match(String(json(unpaired).message), /files\[0\]\.file: is missing/);
  assert.equal(existsSync(path.join(dir, 'lonely.txt')), false);
});

test('upload_zip and download_dir_zip', async () => {
  const dir = scratch();
  const zip = path.join(dir, 'in.zip');
  writeFileSync(zip, buildZip([{ name: 'x/' }, { name: 'x/y.txt', data: 'yyy' }, { name: 'z.txt', data: 'z'.repeat(5000) }]));
  const up = await curl(d, `${F}/upload_zip`, ['-F', `dest_path=${dir}/unzipped`, '-F', `zip_file=@${zip}`]);
  assert.equal(up.status, 204, up.body.toString());
  assert.equal(readFileSync(path.join(dir, 'unzipped', 'x', 'y.txt'), 'utf8'), 'yyy');

  const down = await curl(d, `${F}/download_dir_zip${q(path.join(dir, 'unzipped'))}`);
  assert.equal(down.status, 200);
  assert.equal(down.headers['content-type'], 'application/zip');
  assert.match(down.headers['content-disposition'] ?? '', /filename\*=UTF-8''unzipped\.zip/);
  writeFileSync(path.join(dir, 'out.zip'), down.body);
  mkdirSync(path.join(dir, 'out'));
  await safeUnzip(path.join(dir, 'out.zip'), path.join(dir, 'out'), { maxEntries: 10, maxUnpackedBytes: 1 << 20 });
  assert.equal(readFileSync(path.join(dir, 'out', 'z.txt'), 'utf8'), 'z'.repeat(5000));
  assert.equal(readFileSync(path.join(dir, 'out', 'x', 'y.txt'), 'utf8'), 'yyy');
});

test('watch: start, events with curl -N, stop', async () => {
  const dir = scratch();
  const started = await curl(d, `${F}/watch`, ['-H', 'content-type: application/json', '--data-binary', JSON.stringify({ path: dir })]);
  assert.equal(started.status, 200);
  const id = String(json(started).watch_id);
  const child = spawn('curl', ['-sS', '-N', '-H', `Authorization: Bearer ${TEST_TOKEN}`, `${d.url}${F}/watch/${id}/events`]);
  child.on('error', () => undefined);
  let text = '';
  const waiters: { needle: string; resolve: () => void }[] = [];
  const until = (needle: string): Promise<void> =>
    new Promise((resolve) => {
      if (text.includes(needle)) resolve();
      else waiters.push({ needle, resolve });
    });
  child.stdout.setEncoding('utf8').on('data', (c: string) => {
    text += c;
    for (const w of waiters.filter((x) => text.includes(x.needle))) w.resolve();
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  writeFileSync(path.join(dir, 'n.txt'), 'n'); // queued until curl reads
  await until('"type":"CREATE"');
  unlinkSync(path.join(dir, 'n.txt'));
  await until('"type":"DELETE"');
  assert.match(text, /data: \{"type":"CREATE","path":"[^"]*\/n\.txt","name":"n\.txt","is_dir":false\}/);
  assert.match(text, /data: \{"type":"DELETE","path":"[^"]*\/n\.txt","name":"n\.txt","is_dir":false\}/);
  assert.equal((await curl(d, `${F}/watch/${id}`, ['-X', 'DELETE'])).status, 204);
  assert.equal(await exited, 0, 'curl ends cleanly when the watch stops');
  assert.equal((await curl(d, `${F}/watch/${id}`, ['-X', 'DELETE'])).status, 404);
});

test('downloads: where Chromium saves, and the downloads (none yet)', async () => {
  const r = await curl(d, `${F}/downloads`);
  assert.equal(r.status, 200);
  assert.deepEqual(json(r), { path: `${d.stateDir}-downloads`, downloads: [] });
});
