// Computer controls, input: each route produces exactly the DOM events a person's action would, in
// a real Chromium (headless) behind the real daemon, checked on a loopback page that records every
// event it receives. Driven through the SDK and with plain HTTP (curl's view).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type Kernel from '@onkernel/sdk';
import { curl, expect204, keyLine, mouseLine, openTab, post, sdk, startPageServer, type PageServer, type Rec, type Tab } from '../helpers/computer.js';
import { expectError } from '../helpers/http.js';
import { daemonCdp, waitBrowser, type CdpClient } from '../kit/browser.js';
import { keysFile, startDaemon, type Daemon } from '../kit/daemon.js';

const READER = 'reader-token-0123456789abcdef';
const ACTOR = 'actor-token-0123456789abcdef';

let d: Daemon;
let server: PageServer;
let cdp: CdpClient;
let tab: Tab;
let k: Kernel;
let viewport: { w: number; h: number };

before(async () => {
  server = await startPageServer();
  const keys = keysFile([
    { id: 'reader', token: READER, scopes: ['browser:read'] },
    { id: 'actor', token: ACTOR, scopes: ['computer'] },
  ]);
  d = await startDaemon({ autostart: true, env: { BROWSERD_KEYS_FILE: keys } });
  await waitBrowser(d, (s) => s.state === 'ready', 'ready');
  cdp = await daemonCdp(d);
  tab = await openTab(cdp, `${server.origin}/recorder`, { ready: 'window.__events' });
  const [w, h] = await tab.eval<[number, number]>('[innerWidth, innerHeight]');
  viewport = { w, h };
  k = sdk(d);
});
after(async () => {
  cdp?.close();
  await d?.cleanup();
  await server?.close();
});

/** Puts the pointer at (x, y) on the pad and forgets the events so far. */
async function pointerAt(x: number, y: number): Promise<void> {
  await k.browsers.computer.moveMouse('local', { x, y });
  await tab.events();
}

const mouse = (evs: Rec[]): string[] => evs.filter((e) => e.x !== undefined).map(mouseLine);
const keys = (evs: Rec[]): string[] => evs.filter((e) => e.x === undefined).map(keyLine);
const press = (x: number, y: number, b: number, bs: number, n: number, mods = ''): string[] => {
  const m = mods ? ` ${mods}` : '';
  return [`pointerdown@${x},${y} b${b} bs${bs} d0${m}`, `mousedown@${x},${y} b${b} bs${bs} d${n}${m}`];
};
const release = (x: number, y: number, b: number, n: number, mods = ''): string[] => {
  const m = mods ? ` ${mods}` : '';
  return [`pointerup@${x},${y} b${b} bs0 d0${m}`, `mouseup@${x},${y} b${b} bs0 d${n}${m}`];
};

test('click_mouse: a left click where the pointer is, then elsewhere (a move first), through the SDK', async () => {
  await pointerAt(100, 100);
  await k.browsers.computer.clickMouse('local', { x: 100, y: 100 });
  assert.deepEqual(mouse(await tab.events()), [...press(100, 100, 0, 1, 1), ...release(100, 100, 0, 1), 'click@100,100 b0 bs0 d1']);
  await k.browsers.computer.clickMouse('local', { x: 130, y: 140, button: 'left', click_type: 'click', num_clicks: 1 });
  assert.deepEqual(mouse(await tab.events()), [
    'pointermove@130,140 b-1 bs0 d0',
    'mousemove@130,140 b0 bs0 d0',
    ...press(130, 140, 0, 1, 1),
    ...release(130, 140, 0, 1),
    'click@130,140 b0 bs0 d1',
  ]);
});

test('click_mouse: double and triple clicks count up detail; dblclick after the second', async () => {
  await pointerAt(200, 200);
  await k.browsers.computer.clickMouse('local', { x: 200, y: 200, num_clicks: 2 });
  const click = (n: number): string[] => [...press(200, 200, 0, 1, n), ...release(200, 200, 0, n), `click@200,200 b0 bs0 d${n}`];
  assert.deepEqual(mouse(await tab.events()), [...click(1), ...click(2), 'dblclick@200,200 b0 bs0 d2']);
  await k.browsers.computer.clickMouse('local', { x: 200, y: 200, num_clicks: 3 });
  assert.deepEqual(mouse(await tab.events()), [...click(1), ...click(2), 'dblclick@200,200 b0 bs0 d2', ...click(3)]);
});

test('click_mouse: right, middle, back and forward buttons', async () => {
  await pointerAt(50, 60);
  await k.browsers.computer.clickMouse('local', { x: 50, y: 60, button: 'right' });
  assert.deepEqual(mouse(await tab.events()), [...press(50, 60, 2, 2, 1), 'contextmenu@50,60 b2 bs2 d0', ...release(50, 60, 2, 1), 'auxclick@50,60 b2 bs0 d1']);
  await k.browsers.computer.clickMouse('local', { x: 50, y: 60, button: 'middle' });
  assert.deepEqual(mouse(await tab.events()), [...press(50, 60, 1, 4, 1), ...release(50, 60, 1, 1), 'auxclick@50,60 b1 bs0 d1']);
  await k.browsers.computer.clickMouse('local', { x: 50, y: 60, button: 'back' });
  assert.deepEqual(mouse(await tab.events()), [...press(50, 60, 3, 8, 1), ...release(50, 60, 3, 1), 'auxclick@50,60 b3 bs0 d1']);
  await k.browsers.computer.clickMouse('local', { x: 50, y: 60, button: 'forward' });
  assert.deepEqual(mouse(await tab.events()), [...press(50, 60, 4, 16, 1), ...release(50, 60, 4, 1), 'auxclick@50,60 b4 bs0 d1']);
});

test('click_mouse with hold_keys: the modifiers go down first, are set on every mouse event, come up last', async () => {
  await pointerAt(300, 300);
  await k.browsers.computer.clickMouse('local', { x: 300, y: 300, hold_keys: ['ctrl', 'Shift'] });
  const evs = await tab.events();
  assert.deepEqual(
    evs.map((e) => (e.x !== undefined ? mouseLine(e) : keyLine(e))),
    [
      'keydown "Control" ControlLeft 17 c',
      'keydown "Shift" ShiftLeft 16 cs',
      ...press(300, 300, 0, 1, 1, 'cs'),
      ...release(300, 300, 0, 1, 'cs'),
      'click@300,300 b0 bs0 d1 cs',
      'keyup "Shift" ShiftLeft 16 c',
      'keyup "Control" ControlLeft 17',
    ],
  );
});

test('click_type down, a move with the button held, then up (curl)', async () => {
  await pointerAt(100, 300);
  for (const [route, body] of [
    ['click_mouse', { x: 100, y: 300, click_type: 'down' }],
    ['move_mouse', { x: 120, y: 310 }],
    ['click_mouse', { x: 120, y: 310, click_type: 'up' }],
  ] as const) {
    const res = await curl(d, route, body);
    assert.deepEqual([res.status, res.body.length], [204, 0]);
  }
  assert.deepEqual(mouse(await tab.events()), [
    ...press(100, 300, 0, 1, 1),
    'pointermove@120,310 b-1 bs1 d0',
    'mousemove@120,310 b0 bs1 d0',
    ...release(120, 310, 0, 1),
    'click@120,310 b0 bs0 d1',
  ]);
});

test('move_mouse: one move, or a smooth curve of moves that ends on the point; the position is kept', async () => {
  await pointerAt(10, 10);
  await k.browsers.computer.moveMouse('local', { x: 40, y: 50 });
  assert.deepEqual(mouse(await tab.events()), ['pointermove@40,50 b-1 bs0 d0', 'mousemove@40,50 b0 bs0 d0']);
  await k.browsers.computer.moveMouse('local', { x: 340, y: 250, smooth: true, duration_ms: 150 });
  const moves = (await tab.events()).filter((e) => e.type === 'mousemove');
  assert.ok(moves.length >= 3, `several moves: ${moves.length}`);
  for (const m of moves) assert.ok((m.x as number) >= 0 && (m.x as number) < viewport.w && (m.y as number) >= 0 && (m.y as number) < viewport.h, mouseLine(m));
  assert.deepEqual([moves.at(-1)?.x, moves.at(-1)?.y], [340, 250]);
  assert.deepEqual(await k.browsers.computer.getMousePosition('local'), { x: 340, y: 250 });
  const res = await post(d, 'get_mouse_position');
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), { x: 340, y: 250 });
});

test('drag_mouse: press at the first point, moves along the path with the button held, release at the last', async () => {
  await pointerAt(20, 20);
  await k.browsers.computer.dragMouse('local', { path: [[100, 100], [140, 120], [200, 100]], steps_per_segment: 2 });
  const move = (x: number, y: number, bs: number): string[] => [`pointermove@${x},${y} b-1 bs${bs} d0`, `mousemove@${x},${y} b0 bs${bs} d0`];
  assert.deepEqual(mouse(await tab.events()), [
    ...move(100, 100, 0),
    ...press(100, 100, 0, 1, 1),
    ...move(120, 110, 1),
    ...move(140, 120, 1),
    ...move(170, 110, 1),
    ...move(200, 100, 1),
    ...release(200, 100, 0, 1),
    'click@200,100 b0 bs0 d1',
  ]);
  await pointerAt(300, 300);
  await k.browsers.computer.dragMouse('local', { path: [[300, 300], [400, 350], [350, 200]], smooth: true, duration_ms: 120, delay: 10 });
  const smooth = mouse(await tab.events());
  assert.equal(smooth[0], 'pointerdown@300,300 b0 bs1 d0', 'the pointer was at the first point already');
  assert.deepEqual(smooth.slice(-3), ['pointerup@350,200 b0 bs0 d0', 'mouseup@350,200 b0 bs0 d1', 'click@350,200 b0 bs0 d1']);
  const held = smooth.slice(2, -3);
  assert.ok(held.length >= 8 && held.every((l) => / bs1 d0$/.test(l)), held.join('\n'));
  assert.ok(held.includes('mousemove@400,350 b0 bs1 d0'), 'through the middle point');
  await k.browsers.computer.moveMouse('local', { x: 200, y: 100 });
  await tab.events();
  await k.browsers.computer.dragMouse('local', { path: [[200, 100], [210, 100]], button: 'right', steps_per_segment: 1, hold_keys: ['alt'] });
  assert.deepEqual(
    (await tab.events()).map((e) => (e.x !== undefined ? mouseLine(e) : keyLine(e))),
    [
      'keydown "Alt" AltLeft 18 a',
      ...press(200, 100, 2, 2, 1, 'a'),
      'contextmenu@200,100 b2 bs2 d0 a',
      'pointermove@210,100 b-1 bs2 d0 a',
      'mousemove@210,100 b0 bs2 d0 a',
      ...release(210, 100, 2, 1, 'a'),
      'auxclick@210,100 b2 bs0 d1 a',
      'keyup "Alt" AltLeft 18',
    ],
  );
});

test('scroll: one wheel event of 53 px per unit at the point; the page has scrolled when the answer comes', async () => {
  await pointerAt(150, 150);
  await k.browsers.computer.scroll('local', { x: 150, y: 150, delta_y: 2 });
  const wheel = (dx: number, dy: number): string => `wheel@150,150 dx${dx} dy${dy} m0`;
  const wheels = (evs: Rec[]): string[] => evs.filter((e) => e.type === 'wheel').map((e) => `wheel@${e.x},${e.y} dx${e.dx} dy${e.dy} m${e.mode}`);
  assert.deepEqual(wheels(await tab.events()), [wheel(0, 53), wheel(0, 53)]);
  assert.deepEqual(await tab.eval('[scrollX, scrollY]'), [0, 106]);
  await expect204(await post(d, 'scroll', { x: 150, y: 150, delta_x: 2, delta_y: -1 }));
  assert.deepEqual(wheels(await tab.events()), [wheel(0, -53), wheel(53, 0), wheel(53, 0)]);
  assert.deepEqual(await tab.eval('[scrollX, scrollY]'), [106, 53]);
  await tab.eval('scrollTo(0, 0)');
  await tab.events();
});

test('type: key presses on a US layout (Shift for capitals), other characters as their own key, composed emoji committed as text', async () => {
  await k.browsers.computer.clickMouse('local', { x: 500, y: 50 }); // into the textarea
  assert.equal(await tab.eval('document.activeElement.id'), 'ta');
  await tab.events();
  await k.browsers.computer.typeText('local', { text: 'Hé!' });
  assert.deepEqual(keys(await tab.events()), [
    'keydown "Shift" ShiftLeft 16 s',
    'keydown "H" KeyH 72 s',
    'keypress "H" KeyH 72 s',
    'beforeinput insertText "H"',
    'input insertText "H"',
    'keyup "H" KeyH 72 s',
    'keyup "Shift" ShiftLeft 16',
    'keydown "é"  0',
    'keypress "é"  233',
    'beforeinput insertText "é"',
    'input insertText "é"',
    'keyup "é"  0',
    'keydown "Shift" ShiftLeft 16 s',
    'keydown "!" Digit1 49 s',
    'keypress "!" Digit1 33 s',
    'beforeinput insertText "!"',
    'input insertText "!"',
    'keyup "!" Digit1 49 s',
    'keyup "Shift" ShiftLeft 16',
  ]);
  const family = '\u{1F468}\u200D\u{1F469}\u200D\u{1F467}';
  await expect204(await post(d, 'type', { text: ` 你😀${family}\nok`, delay: 5 }));
  const evs = await tab.events();
  assert.deepEqual(
    evs.filter((e) => e.type === 'input').map((e) => `${e.inputType} ${JSON.stringify(e.data)}`),
    ['insertText " "', 'insertText "你"', 'insertText "😀"', `insertText ${JSON.stringify(family)}`, 'insertLineBreak null', 'insertText "o"', 'insertText "k"'],
  );
  assert.equal(evs.filter((e) => e.type === 'keydown').length, 6, 'a key press for each character but the composed emoji');
  assert.equal(await tab.eval('document.getElementById("ta").value'), `Hé! 你😀${family}\nok`);
});

test('press_key: combinations with modifiers, named keys, xdotool spellings; the text is edited as by a person', async () => {
  await k.browsers.computer.pressKey('local', { keys: ['ctrl+a', 'BackSpace'] });
  assert.deepEqual(keys(await tab.events()), [
    'keydown "Control" ControlLeft 17 c',
    'keydown "a" KeyA 65 c',
    'keyup "a" KeyA 65 c',
    'keyup "Control" ControlLeft 17',
    'keydown "Backspace" Backspace 8',
    'beforeinput deleteContentBackward null',
    'input deleteContentBackward null',
    'keyup "Backspace" Backspace 8',
  ]);
  assert.equal(await tab.eval('document.getElementById("ta").value'), '');
  await expect204(await post(d, 'press_key', { keys: ['x', 'Return', 'Ctrl+Shift+t', 'comma', 'KP_5', 'Escape'], duration: 20 }));
  assert.deepEqual(keys(await tab.events()), [
    'keydown "x" KeyX 88',
    'keypress "x" KeyX 120',
    'beforeinput insertText "x"',
    'input insertText "x"',
    'keyup "x" KeyX 88',
    'keydown "Enter" Enter 13',
    'keypress "Enter" Enter 13',
    'beforeinput insertLineBreak null',
    'input insertLineBreak null',
    'keyup "Enter" Enter 13',
    'keydown "Control" ControlLeft 17 c',
    'keydown "Shift" ShiftLeft 16 cs',
    'keydown "T" KeyT 84 cs',
    'keyup "T" KeyT 84 cs',
    'keyup "Shift" ShiftLeft 16 c',
    'keyup "Control" ControlLeft 17',
    'keydown "," Comma 188',
    'keypress "," Comma 44',
    'beforeinput insertText ","',
    'input insertText ","',
    'keyup "," Comma 188',
    'keydown "5" Numpad5 101',
    'keypress "5" Numpad5 53',
    'beforeinput insertText "5"',
    'input insertText "5"',
    'keyup "5" Numpad5 101',
    'keydown "Escape" Escape 27',
    'keyup "Escape" Escape 27',
  ]);
  assert.equal(await tab.eval('document.getElementById("ta").value'), 'x\n,5');
  await k.browsers.computer.pressKey('local', { keys: ['ctrl+a', 'Delete'], hold_keys: [] });
  assert.equal(await tab.eval('document.getElementById("ta").value'), '');
  await tab.events();
});

test('batch: actions in order on the current page; the first failure stops it and names its index', async () => {
  await pointerAt(60, 60);
  await k.browsers.computer.batch('local', {
    actions: [
      { type: 'click_mouse', click_mouse: { x: 60, y: 60 } },
      { type: 'sleep', sleep: { duration_ms: 10 } },
      { type: 'click_mouse', click_mouse: { x: 500, y: 50 } },
      { type: 'type_text', type_text: { text: 'ab' } },
      { type: 'press_key', press_key: { keys: ['BackSpace'] } },
      { type: 'set_cursor', set_cursor: { hidden: true } },
      { type: 'move_mouse', move_mouse: { x: 70, y: 80 } },
    ],
  });
  const evs = await tab.events();
  assert.deepEqual(
    evs.filter((e) => ['click', 'input', 'mousemove'].includes(e.type)).map((e) => (e.type === 'input' ? `input ${e.inputType}` : `${e.type}@${e.x},${e.y}`)),
    ['click@60,60', 'mousemove@500,50', 'click@500,50', 'input insertText', 'input insertText', 'input deleteContentBackward', 'mousemove@70,80'],
  );
  assert.equal(await tab.eval('document.getElementById("ta").value'), 'a');

  const res = await post(d, 'batch', {
    actions: [
      { type: 'click_mouse', click_mouse: { x: 61, y: 61 } },
      { type: 'click_mouse', click_mouse: { x: viewport.w, y: 10 } },
      { type: 'click_mouse', click_mouse: { x: 62, y: 62 } },
    ],
  });
  const body = await expectError(res, 400, 'bad_request');
  assert.match(String(body.message), /^actions\[1\] \(click_mouse\): x: \d+ is outside the viewport/);
  assert.match((body.details as { message: string }[])[0]?.message ?? '', /^actions\.1\.click_mouse\.x: /);
  assert.deepEqual(
    (await tab.events()).filter((e) => e.type === 'click').map((e) => `${e.x},${e.y}`),
    ['61,61'],
    'the action before the failure was done, the one after it not',
  );

  // Validation happens before anything runs.
  const invalid = await post(d, 'batch', {
    actions: [
      { type: 'click_mouse', click_mouse: { x: 63, y: 63 } },
      { type: 'press_key', press_key: { keys: ['NoSuchKey'] } },
      { type: 'sleep', move_mouse: { x: 1, y: 1 } },
    ],
  });
  const ib = await expectError(invalid, 400, 'bad_request');
  const problems = (ib.details as { message: string }[]).map((x) => x.message);
  assert.ok(problems.some((p) => p.startsWith('actions.1.press_key.keys.0: "NoSuchKey" is not a key name')), problems.join('\n'));
  assert.ok(problems.some((p) => p.startsWith('actions.2.sleep: is required with type sleep')), problems.join('\n'));
  assert.ok(problems.some((p) => p.startsWith('actions.2.move_mouse: must be absent')), problems.join('\n'));
  assert.deepEqual((await tab.events()).filter((e) => e.type === 'click'), []);

  const unsupported = await post(d, 'batch', { actions: [{ type: 'set_cursor', set_cursor: { hidden: false } }] });
  const ub = await expectError(unsupported, 422, 'unsupported_field');
  assert.match(String(ub.message), /^actions\[0\] \(set_cursor\): hidden: /);
  assert.deepEqual(ub.details, [{ code: 'failed_action', message: 'actions[0]' }]);
});

test('errors: outside the viewport, unknown keys, wrong combinations, waits over the limit, cursor', async () => {
  const outside = await expectError(await post(d, 'click_mouse', { x: viewport.w, y: viewport.h + 5 }), 400, 'bad_request');
  assert.deepEqual(
    (outside.details as { message: string }[]).map((x) => x.message),
    [
      `x: ${viewport.w} is outside the viewport (0 ≤ x < ${viewport.w}; the viewport is ${viewport.w}×${viewport.h} CSS pixels)`,
      `y: ${viewport.h + 5} is outside the viewport (0 ≤ y < ${viewport.h}; the viewport is ${viewport.w}×${viewport.h} CSS pixels)`,
    ],
  );
  await expectError(await post(d, 'drag_mouse', { path: [[1, 1], [-1, 2]] }), 400, 'bad_request');
  await expectError(await post(d, 'scroll', { x: -0.5, y: 1, delta_y: 1 }), 400, 'bad_request');
  const key = await expectError(await post(d, 'press_key', { keys: ['ctrl+Bogus'] }), 400, 'bad_request');
  assert.match(String(key.message), /^keys\.0: "Bogus" is not a key name/);
  const hold = await expectError(await post(d, 'click_mouse', { x: 1, y: 1, hold_keys: ['Hyper_Q'] }), 400, 'bad_request');
  assert.match(String(hold.message), /^hold_keys\.0: /);
  const n = await expectError(await post(d, 'click_mouse', { x: 1, y: 1, click_type: 'down', num_clicks: 2 }), 400, 'bad_request');
  assert.match(String(n.message), /^num_clicks: /);
  await expectError(await post(d, 'click_mouse', { x: 1, y: 1, z: 1 }), 400, 'bad_request');
  await expectError(await post(d, 'drag_mouse', { path: [[1, 1]] }), 400, 'bad_request');
  await expectError(await post(d, 'scroll', { x: 1, y: 1, delta_y: 1.5 }), 400, 'bad_request');
  const waits = await expectError(await post(d, 'type', { text: 'x'.repeat(200), delay: 1000 }), 400, 'bad_request');
  assert.match(String(waits.message), /BROWSERD_COMPUTER_MAX_WAIT_MS/);
  await expectError(await post(d, 'get_mouse_position', { x: 1 }), 400, 'bad_request');
  assert.deepEqual(await tab.events(), [], 'no refused request reached the page');

  assert.deepEqual(await k.browsers.computer.setCursorVisibility('local', { hidden: true }), { ok: true });
  await assert.rejects(k.browsers.computer.setCursorVisibility('local', { hidden: false }), (err: { status?: number; error?: { code?: string } }) => {
    assert.equal(err.status, 422);
    assert.equal(err.error?.code, 'unsupported_field');
    return true;
  });
});

test('scope computer: a key without it is 403 naming it; a key with only it acts', async () => {
  const denied = await d.fetch('/browsers/local/computer/click_mouse', { method: 'POST', json: { x: 1, y: 1 }, headers: { authorization: `Bearer ${READER}` } });
  const body = await expectError(denied, 403, 'forbidden');
  assert.deepEqual(body.details, [{ code: 'missing_scope', message: 'computer' }]);
  const ok = await d.fetch('/browsers/local/computer/get_mouse_position', { method: 'POST', headers: { authorization: `Bearer ${ACTOR}` } });
  assert.equal(ok.status, 200);
  const noToken = await fetch(`${d.url}/browsers/local/computer/screenshot`, { method: 'POST' });
  await expectError(noToken, 401, 'unauthorized');
});

test('a current page whose renderer is slow to answer gets the click (not 409 no_page), also beside a hung tab in the background', async () => {
  const slow = await openTab(cdp, `${server.origin}/recorder`, { ready: 'window.__events' });
  const { targetId: hung } = await cdp.send('Target.createTarget', { url: 'data:text/html,<script>for (;;) {}</script>', background: true });
  try {
    // Its main thread busy for 2 s from now, longer than any fixed wait for its answer would be:
    // the daemon has never asked this page whether it is showing, and gets no answer until then.
    assert.equal(await slow.eval('setTimeout(() => { const t = Date.now(); while (Date.now() - t < 2000); }, 0), true'), true);
    await k.browsers.computer.clickMouse('local', { x: 33, y: 44 });
    assert.deepEqual((await slow.events()).filter((e) => e.type === 'click').map((e) => [e.x, e.y]), [[33, 44]]);
    // The tab behind gets no input (its pointer may leave it when the new tab comes forward: pointerout, mouseout).
    const behind = (await tab.events()).filter((e) => !['pointerout', 'mouseout', 'pointerleave', 'mouseleave'].includes(e.type));
    assert.deepEqual(behind, [], 'nothing reached the tab behind it');
  } finally {
    await cdp.send('Target.closeTarget', { targetId: hung });
    await slow.close();
    await cdp.send('Page.bringToFront', {}, { sessionId: tab.sessionId });
  }
});
