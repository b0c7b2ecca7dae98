// User text written into other formats stays data: replay marker labels in ffmpeg's ffmetadata
// (checked by the real ffmpeg reading the file back, with ffprobe), and an SSE event's data line.
// The route's refusal of control characters in a label is in replays.test.ts.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { sseEvent } from '../../daemon/core/streams/sse.js';
import { chaptersFile } from '../../daemon/replays/recording.js';
import { tempDir } from '../kit/cleanup.js';

const run = promisify(execFile);

test('labels with ; # = \\ and newline (and control characters that reached the record) are chapter titles, never structure', async () => {
  const dir = tempDir('browserd-chapters-');
  const video = path.join(dir, 'in.mp4');
  await run('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-f', 'lavfi', '-i', 'testsrc=size=64x64:rate=5:duration=3', '-c:v', 'mpeg4', video]);
  const labels = [
    'a;b#c=d\\e',
    'one\n[CHAPTER]\nTIMEBASE=1/1000\nSTART=0\nEND=5\ntitle=forged',
    'cut\0here',
    'carriage\r[CHAPTER]\rtitle=forged',
    '#comment-like',
    ';FFMETADATA1',
  ];
  const markers = labels.map((label, i) => ({ label, at_ms: i * 400 }));
  const meta = path.join(dir, 'chapters.txt');
  writeFileSync(meta, chaptersFile(markers, 3000));
  const out = path.join(dir, 'out.mp4');
  await run('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-i', video, '-f', 'ffmetadata', '-i', meta, '-map_metadata', '1', '-map_chapters', '1', '-c', 'copy', out]);
  const { stdout } = await run('ffprobe', ['-v', 'error', '-show_chapters', '-of', 'json', out]);
  const chapters = (JSON.parse(stdout) as { chapters: { start_time: string; tags: { title: string } }[] }).chapters;
  assert.equal(chapters.length, labels.length, 'no chapter forged, none cut');
  assert.deepEqual(
    chapters.map((c) => c.tags.title),
    labels.map((l) => l.replace(/\p{Cc}/gu, '')),
  );
  assert.deepEqual(chapters.map((c) => Math.round(Number(c.start_time) * 1000)), markers.map((m) => m.at_ms));
});

test('an SSE event: any text in its data stays one data line (no forged event, id or field)', () => {
  const frame = sseEvent({ text: 'x\r\n\r\nevent: forged\nid: 99\r\ndata: {}\n\n' }, { event: 'line', id: 1 });
  const lines = frame.split(/\r\n|\r|\n/);
  assert.deepEqual(lines.slice(0, 3).map((l) => l.split(':')[0]), ['event', 'id', 'data']);
  assert.deepEqual(lines.slice(3), ['', ''], 'the frame ends after its one data line');
  assert.throws(() => sseEvent({}, { event: 'a\nid: 5' }), /event name/);
});
