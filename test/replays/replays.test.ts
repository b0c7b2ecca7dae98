// @long: recordings of a few seconds each, encoded by a real ffmpeg.
// Replays through the SDK (`browsers.replays`): a real Chromium shows a page whose colour changes
// every second, a real ffmpeg records it, ffprobe and ffmpeg read the video back (codec, size,
// duration, frame count, the colour of a frame); a daemon killed with SIGKILL while recording
// leaves a video the next start finalizes and lists as stopped; ten start/stop cycles leave no
// ffmpeg and no temp file; a tab switch during a recording shows in it.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { promisify } from 'node:util';
import { openTab, sdk, type Tab } from '../helpers/computer.js';
import { daemonCdp, waitBrowser, type CdpClient } from '../kit/browser.js';
import { scratchDirs } from '../kit/cleanup.js';
import { startDaemon, type Daemon } from '../kit/daemon.js';
import { processesNaming } from '../kit/procs.js';
import { until } from '../kit/wait.js';
import { startOrigin, type Origin } from '../kit/origin.js';

const run = promisify(execFile);
const scratch = scratchDirs('browserd-replays-');
const COLOURS: [number, number, number][] = [
  [255, 0, 0],
  [0, 160, 0],
  [0, 0, 255],
  [255, 255, 0],
];
const css = (c: [number, number, number]): string => `rgb(${c.join(',')})`;

// /colours: the colour is COLOURS[floor((now - epoch) / 1000) % 4], epoch set by the test
// (window.__epoch); /solid?c=i: one colour.
const PAGE = `<!doctype html><html><head><style>html,body{margin:0;height:100%}</style></head><body><script>
window.__epoch = Date.now();
const colours = ${JSON.stringify(COLOURS.map(css))};
// Every change of colour is noted with the time of the frame that paints it: what the page showed when.
window.__shown = [];
function paint() {
  const k = ((Math.floor((Date.now() - window.__epoch) / 1000) % 4) + 4) % 4;
  if (window.__shown.length === 0 || window.__shown[window.__shown.length - 1][1] !== k) {
    document.body.style.background = colours[k];
    window.__shown.push([Date.now(), k]);
  }
  requestAnimationFrame(paint);
}
paint();
</script></body></html>`;

const VIEWPORT = { BROWSERD_VIEWPORT: '640x360' };
let d: Daemon;
let origin: Origin;
let base: string;
let cdp: CdpClient;
let tab: Tab;

before(async () => {
  origin = await startOrigin((req, res) => {
    const solid = /^\/solid\?c=(\d)$/.exec(req.url ?? '');
    const html = solid !== null ? `<!doctype html><body style="margin:0;background:${css(COLOURS[Number(solid[1])] as [number, number, number])}"></body>` : PAGE;
    res.writeHead(200, { 'content-type': 'text/html', 'cache-control': 'no-store' }).end(html);
  });
  base = origin.url;
  // A small viewport: what is measured is when frames land in the video, and 1920×1080 JPEGs encoded
  // by a loaded 2-core machine put seconds of work between a paint and its frame.
  d = await startDaemon({ autostart: true, env: VIEWPORT });
  await waitBrowser(d, (s) => s.state === 'ready', 'ready');
  cdp = await daemonCdp(d);
  tab = await openTab(cdp, `${base}/colours`, { ready: 'window.__epoch' });
});
after(async () => {
  cdp?.close();
  await d?.cleanup();
  await origin.close();
});

interface Probe {
  codec: string;
  width: number;
  height: number;
  duration: number;
  frames: number;
}

async function ffprobe(file: string): Promise<Probe> {
  const { stdout } = await run('ffprobe', ['-v', 'error', '-count_frames', '-select_streams', 'v:0', '-show_entries', 'stream=codec_name,width,height,nb_read_frames,pix_fmt:format=duration', '-of', 'json', file]);
  const j = JSON.parse(stdout) as { streams: { codec_name: string; width: number; height: number; nb_read_frames: string; pix_fmt: string }[]; format: { duration: string } };
  const s = j.streams[0];
  assert.ok(s !== undefined, 'a video stream');
  assert.equal(s.pix_fmt, 'yuv420p');
  return { codec: s.codec_name, width: s.width, height: s.height, duration: Number(j.format.duration), frames: Number(s.nb_read_frames) };
}

/**
 * The colour of the centre of the frame a player shows at `sec`: the last one that starts at or
 * before it (a frame lasts until the next: the video's frame rate is variable).
 */
async function colourAt(file: string, sec: number): Promise<[number, number, number]> {
  const { stdout } = await run('ffmpeg', ['-v', 'error', '-i', file, '-vf', `trim=end=${sec + 0.001},crop=8:8:iw/2:ih/2,scale=1:1`, '-fps_mode', 'passthrough', '-f', 'rawvideo', '-pix_fmt', 'rgb24', 'pipe:1'], { encoding: 'buffer' });
  const last = stdout.length - 3;
  return [stdout[last] as number, stdout[last + 1] as number, stdout[last + 2] as number];
}

/** The colour at the centre of a still image (a screenshot). */
async function centreOf(image: string): Promise<[number, number, number]> {
  const { stdout } = await run('ffmpeg', ['-v', 'error', '-i', image, '-frames:v', '1', '-vf', 'crop=8:8:iw/2:ih/2,scale=1:1', '-f', 'rawvideo', '-pix_fmt', 'rgb24', 'pipe:1'], { encoding: 'buffer' });
  return [stdout[0] as number, stdout[1] as number, stdout[2] as number];
}

function near(a: [number, number, number], b: [number, number, number]): boolean {
  return a.every((v, i) => Math.abs(v - (b[i] as number)) <= 40);
}

async function download(id: string): Promise<string> {
  const res = await sdk(d).browsers.replays.download(id, { id: 'local' });
  assert.equal(res.headers.get('content-type'), 'video/mp4');
  const file = path.join(scratch(), `${id}.mp4`);
  writeFileSync(file, Buffer.from(await res.arrayBuffer()));
  return file;
}

test('start → 3 s of a page changing colour every second → stop → download: H.264 of the viewport, the wall time, at most framerate × duration frames, the right colour at 2 s', async () => {
  const kernel = sdk(d);
  const started = await kernel.browsers.replays.start('local', { framerate: 10 });
  const t0 = Date.now();
  assert.match(started.replay_id, /^[0-9a-f-]{36}$/);
  assert.ok(started.started_at);
  // The page's colours from 0.1 s after the start: colour 1 from 1.1 s to 2.1 s.
  const epoch = Date.parse(started.started_at as string) + 100;
  await tab.eval(`window.__epoch = ${epoch}`);
  const listed = await kernel.browsers.replays.list('local');
  assert.equal(listed.find((r) => r.replay_id === started.replay_id)?.finished_at, null);
  const early = await d.fetch(`/browsers/local/replays/${started.replay_id}`);
  assert.equal(early.status, 202, 'still recording');
  assert.equal(early.headers.get('retry-after'), '1');
  await early.text();
  const marker = await d.fetch(`/browsers/local/replays/${started.replay_id}/markers`, { method: 'POST', json: { label: 'half way' } });
  assert.equal(marker.status, 201);
  // A label is one line of text: control characters are refused (they would cut or forge chapters); ; # = \ are escaped.
  for (const label of ['a\0b', 'a\rb', 'a\n[CHAPTER]']) {
    const bad = await d.fetch(`/browsers/local/replays/${started.replay_id}/markers`, { method: 'POST', json: { label } });
    assert.equal(bad.status, 400, JSON.stringify(label));
    await bad.text();
  }
  const marked = await d.fetch(`/browsers/local/replays/${started.replay_id}/markers`, { method: 'POST', json: { label: 'x;y#z=w\\v' } });
  assert.equal(marked.status, 201);
  await marked.text();
  const mark = (await marker.json()) as { at_ms: number };
  await until('3 s of recording', () => Date.now() - t0 >= 3000, 5000, 50);
  // The wall time of the recording: from its start (started_at) to the stop, which the daemon takes
  // between the request and its answer.
  const wallMin = (Date.now() - Date.parse(started.started_at as string)) / 1000;
  await kernel.browsers.replays.stop(started.replay_id, { id: 'local' });
  const wallMax = (Date.now() - Date.parse(started.started_at as string)) / 1000;
  const file = await download(started.replay_id);
  const p = await ffprobe(file);
  const [w, h] = await tab.eval<[number, number]>('[innerWidth, innerHeight]');
  assert.equal(p.codec, 'h264');
  assert.deepEqual([p.width, p.height], [w - (w % 2), h - (h % 2)]);
  assert.ok(p.duration >= wallMin * 0.9 && p.duration <= wallMax * 1.1, `duration ${p.duration} s within 10% of the wall time, ${wallMin}–${wallMax} s`);
  // A frame only when the page changed (here once a second) and one a second while it did not, at most the framerate.
  assert.ok(p.frames >= Math.floor(p.duration) && p.frames <= 10 * p.duration * 1.1, `${p.frames} frames: at least one a second, at most 10 × ${p.duration}`);
  // What a person saw 2 s in: colour 1, painted from 1.1 s (its paints are noted, for the message).
  // A frame shows a paint a little after it, never before; 1.1 s leaves 0.9 s for that on a loaded
  // machine, and the next colour comes only at 2.1 s.
  const shown = await tab.eval<[number, number][]>('window.__shown');
  const at = Date.parse(started.started_at as string) + 2000;
  const c = await colourAt(file, 2);
  assert.ok(near(c, COLOURS[1] as [number, number, number]), `the frame at 2 s is ${c}, the page showed ${COLOURS[1]} (its paints: ${JSON.stringify(shown.slice(-4))}, 2 s = ${at})`);
  // The marker's chapter starts at the marker's time (not at 0), after a lead chapter from 0; it lasts to the end.
  const { stdout } = await run('ffprobe', ['-v', 'error', '-show_chapters', '-of', 'json', file]);
  const chapters = (JSON.parse(stdout) as { chapters: { start_time: string; end_time: string; tags: { title: string } }[] }).chapters;
  assert.deepEqual(chapters.map((c) => c.tags.title), ['start', 'half way', 'x;y#z=w\\v']);
  assert.ok(Math.abs(Number(chapters[1]?.start_time) - mark.at_ms / 1000) < 0.01, `the chapter starts at ${chapters[1]?.start_time} s, the marker at ${mark.at_ms} ms`);
  assert.equal(Number(chapters[0]?.start_time), 0);
  assert.ok(Math.abs(Number(chapters[0]?.end_time) - mark.at_ms / 1000) < 0.01);
  const done = (await kernel.browsers.replays.list('local')).find((r) => r.replay_id === started.replay_id) as unknown as Record<string, unknown>;
  assert.equal(done.state, 'stopped');
  assert.equal(done.stop_reason, 'requested');
  assert.equal(typeof done.finished_at, 'string');
  const late = await d.fetch(`/browsers/local/replays/${started.replay_id}/markers`, { method: 'POST', json: { label: 'late' } });
  assert.equal(late.status, 409);
  assert.equal(((await late.json()) as { code: string }).code, 'replay_stopped');
});

test('bad requests: record_audio is 422 unsupported_field, a framerate out of range and a duration over the limit are 400, an unknown replay 404', async () => {
  const audio = await d.fetch('/browsers/local/replays', { method: 'POST', json: { record_audio: true } });
  assert.equal(audio.status, 422);
  assert.equal(((await audio.json()) as { code: string }).code, 'unsupported_field');
  for (const body of [{ framerate: 0 }, { framerate: 21 }, { framerate: 2.5 }, { max_duration_in_seconds: 86_401 }, { nope: 1 }]) {
    const res = await d.fetch('/browsers/local/replays', { method: 'POST', json: body });
    assert.equal(res.status, 400, JSON.stringify(body));
    await res.text();
  }
  for (const [method, suffix] of [['GET', ''], ['POST', '/stop'], ['DELETE', '']] as const) {
    const res = await d.fetch(`/browsers/local/replays/00000000-0000-0000-0000-000000000000${suffix}`, { method });
    assert.equal(res.status, 404, `${method} ${suffix}`);
    await res.text();
  }
});

test('max_duration_in_seconds stops a recording by itself, finalized, saying why', async () => {
  const r = await sdk(d).browsers.replays.start('local', { max_duration_in_seconds: 1 });
  let rec: Record<string, unknown> | undefined;
  await until('stopped at its limit', async () => {
    rec = (await sdk(d).browsers.replays.list('local')).find((x) => x.replay_id === r.replay_id) as unknown as Record<string, unknown> | undefined;
    return rec?.state === 'stopped';
  }, 20_000, 100);
  assert.equal(rec?.stop_reason, 'max_duration');
  const p = await ffprobe(await download(r.replay_id));
  assert.ok(p.duration >= 0.8 && p.duration <= 2.5, `about 1 s: ${p.duration}`);
});

test('10 start/stop cycles leave no ffmpeg and no temp file; DELETE removes a replay', async () => {
  const kernel = sdk(d);
  const dir = path.join(d.stateDir, 'replays');
  const ids: string[] = [];
  for (let i = 0; i < 10; i++) {
    const r = await kernel.browsers.replays.start('local', {});
    ids.push(r.replay_id);
    await kernel.browsers.replays.stop(r.replay_id, { id: 'local' });
  }
  assert.deepEqual(processesNaming(dir), [], 'no ffmpeg writing there');
  const left = readdirSync(dir).filter((f) => !/^[0-9a-f-]{36}\.(mp4|json)$/.test(f));
  assert.deepEqual(left, [], 'only finished videos and their records');
  for (const id of ids) {
    const res = await d.fetch(`/browsers/local/replays/${id}`, { method: 'DELETE' });
    assert.equal(res.status, 204);
  }
  assert.ok(!readdirSync(dir).some((f) => ids.some((id) => f.startsWith(id))), 'their files are gone');
});

test('a tab switch during a recording shows the new tab in the video', async () => {
  const kernel = sdk(d);
  const red = await openTab(cdp, `${base}/solid?c=0`);
  const r = await kernel.browsers.replays.start('local', { framerate: 10 });
  await until('1 s on the red tab', () => Date.now() - Date.parse(r.started_at as string) >= 1000, 5000, 50);
  const blue = await openTab(cdp, `${base}/solid?c=2`);
  // The screencast follows the tab a person sees: once the computer controls show the blue tab (a
  // state, not a time: a loaded machine takes longer), one more second of it ends the video.
  let seen: [number, number, number] = [0, 0, 0];
  await until(() => `the blue tab shown (the screenshot shows ${seen.join(',')})`, async () => {
    const shot = path.join(scratch(), 'shown.png');
    writeFileSync(shot, Buffer.from(await (await kernel.browsers.computer.captureScreenshot('local')).arrayBuffer()));
    seen = await centreOf(shot);
    return near(seen, COLOURS[2] as [number, number, number]);
  }, 30_000, 200);
  const shownAt = Date.now();
  await until('1.5 s of the blue tab', () => Date.now() - shownAt >= 1500, 5000, 50);
  await kernel.browsers.replays.stop(r.replay_id, { id: 'local' });
  const file = await download(r.replay_id);
  assert.ok(near(await colourAt(file, 0.5), COLOURS[0] as [number, number, number]), 'red first');
  const p = await ffprobe(file);
  const end = await colourAt(file, Math.max(0, p.duration - 0.3));
  assert.ok(near(end, COLOURS[2] as [number, number, number]), `blue at the end, got ${end}`);
  await blue.close();
  await red.close();
});

test('kill -9 of the daemon while recording: the next start finalizes the video and lists it as stopped; it plays whole', async () => {
  const d2 = await startDaemon({ autostart: true, env: VIEWPORT });
  try {
    await waitBrowser(d2, (s) => s.state === 'ready', 'ready');
    const c2 = await daemonCdp(d2);
    await openTab(c2, `${base}/colours`, { ready: 'window.__epoch' });
    const r = await sdk(d2).browsers.replays.start('local', { framerate: 10 });
    // Two keyframe intervals on disk (a fragment every 2 s).
    await until('4 s recorded', () => Date.now() - Date.parse(r.started_at as string) >= 4500, 8000, 50);
    c2.close();
    d2.proc.kill('SIGKILL');
    await until('the daemon gone', () => d2.proc.exitCode !== null || d2.proc.signalCode !== null, 10_000, 20);
    const d3 = await startDaemon({ stateDir: d2.stateDir, env: VIEWPORT });
    try {
      let rec: Record<string, unknown> | undefined;
      await until('listed as stopped', async () => {
        rec = (await sdk(d3).browsers.replays.list('local')).find((x) => x.replay_id === r.replay_id) as unknown as Record<string, unknown> | undefined;
        return rec?.state === 'stopped';
      }, 20_000, 100);
      assert.equal(rec?.stop_reason, 'recovered');
      const res = await sdk(d3).browsers.replays.download(r.replay_id, { id: 'local' });
      const file = path.join(scratch(), 'recovered.mp4');
      writeFileSync(file, Buffer.from(await res.arrayBuffer()));
      const p = await ffprobe(file);
      assert.equal(p.codec, 'h264');
      assert.ok(p.duration >= 2, `at least the fragments on disk: ${p.duration} s`);
      const decode = await run('ffmpeg', ['-v', 'error', '-i', file, '-f', 'null', '-']);
      assert.equal(decode.stderr, '', 'it decodes whole, without errors');
    } finally {
      await d3.cleanup();
    }
  } finally {
    await d2.cleanup();
  }
});
