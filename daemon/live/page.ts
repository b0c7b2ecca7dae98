// The live view's page: one self-contained HTML document (its script and style inline, nothing
// fetched from anywhere but its own WebSocket), so it works on a closed network. It draws each
// JPEG frame on a canvas scaled to the window (aspect kept), and sends back, unless it is view-only,
// the mouse (coordinates normalised to the frame), keys (with the viewer's own layout), text of an
// input method and pastes, copy requests, and the toolbar's navigation. Its WebSocket URL is its own
// URL plus /ws with the same query (a token given as ?jwt= or ?token= goes along).

const STYLE = `
*{box-sizing:border-box}
html,body{margin:0;height:100%;background:#202124;color:#e8eaed;font:13px system-ui,sans-serif;overflow:hidden}
#bar{display:flex;gap:4px;align-items:center;padding:4px;background:#35363a}
#bar button{background:#4a4b4f;color:#e8eaed;border:0;border-radius:4px;min-width:28px;height:26px;cursor:pointer}
#bar button:disabled{opacity:.4;cursor:default}
#url{flex:1;height:26px;border:0;border-radius:13px;padding:0 10px;background:#202124;color:#e8eaed}
#tabs{display:flex;gap:2px;padding:2px 4px 0;background:#292a2d;overflow-x:auto;white-space:nowrap}
#tabs button{max-width:200px;overflow:hidden;text-overflow:ellipsis;background:#35363a;color:#bdc1c6;border:0;border-radius:6px 6px 0 0;padding:4px 10px;cursor:pointer}
#tabs button.current{background:#4a4b4f;color:#fff}
#status{padding:0 6px;color:#9aa0a6;white-space:nowrap}
#stage{position:absolute;left:0;right:0;bottom:0;display:flex;align-items:center;justify-content:center}
#screen{background:#000;outline:none;touch-action:none}
#kb{position:absolute;left:-1000px;top:0;width:10px;height:10px;opacity:0}
#toast{position:absolute;right:10px;bottom:10px;background:#35363a;padding:6px 10px;border-radius:4px;display:none;max-width:50%}
`;

const SCRIPT = `
'use strict';
const $ = (id) => document.getElementById(id);
const canvas = $('screen'), ctx = canvas.getContext('2d'), kb = $('kb'), status = $('status'), urlBox = $('url');
const live = (window.__live = { frames: 0, control: false, open: false, state: null, copied: null });
const wsUrl = (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + location.pathname.replace(/\\/$/, '') + '/ws' + location.search;
let ws = null, retry = 0, drawing = false, nextBlob = null;

function setStatus(text) { status.textContent = text; }
function send(msg) { if (live.control && ws && ws.readyState === 1) ws.send(JSON.stringify(msg)); }

function layout() {
  const top = $('top').getBoundingClientRect().height;
  const stage = $('stage');
  stage.style.top = top + 'px';
  const w = stage.clientWidth, h = stage.clientHeight;
  if (!canvas.width || !canvas.height) return;
  const s = Math.min(w / canvas.width, h / canvas.height);
  canvas.style.width = Math.floor(canvas.width * s) + 'px';
  canvas.style.height = Math.floor(canvas.height * s) + 'px';
}
window.addEventListener('resize', layout);

async function draw(blob) {
  if (drawing) { nextBlob = blob; return; }
  drawing = true;
  try {
    const img = await createImageBitmap(blob);
    if (canvas.width !== img.width || canvas.height !== img.height) { canvas.width = img.width; canvas.height = img.height; layout(); }
    ctx.drawImage(img, 0, 0);
    img.close();
    live.frames++;
  } catch (e) { /* a frame that does not decode is skipped */ }
  drawing = false;
  if (nextBlob) { const b = nextBlob; nextBlob = null; draw(b); }
}

function renderState(s) {
  live.state = s;
  if (document.activeElement !== urlBox) urlBox.value = s.url;
  $('back').disabled = !live.control || !s.canGoBack;
  $('forward').disabled = !live.control || !s.canGoForward;
  const tabs = $('tabs');
  tabs.textContent = '';
  for (const t of s.tabs) {
    const b = document.createElement('button');
    b.textContent = t.title || t.url || 'New tab';
    b.title = t.url;
    if (t.current) b.className = 'current';
    b.onclick = () => send({ t: 'activate', targetId: t.targetId });
    tabs.appendChild(b);
  }
  layout();
}

function copied(text) {
  live.copied = text;
  const toast = $('toast');
  toast.textContent = 'Copied: ' + (text.length > 80 ? text.slice(0, 80) + '…' : text);
  toast.style.display = 'block';
  setTimeout(() => (toast.style.display = 'none'), 2000);
  const fallback = () => { kb.value = text; kb.select(); try { document.execCommand('copy'); } catch (e) {} kb.value = ''; };
  if (navigator.clipboard && navigator.clipboard.writeText) navigator.clipboard.writeText(text).catch(fallback); else fallback();
}

function connect() {
  setStatus('connecting…');
  ws = new WebSocket(wsUrl);
  ws.binaryType = 'blob';
  ws.onopen = () => { retry = 0; live.open = true; };
  ws.onmessage = (e) => {
    if (typeof e.data !== 'string') return draw(e.data);
    let m;
    try { m = JSON.parse(e.data); } catch (err) { return; }
    if (m.t === 'hello') { live.control = m.control; setStatus(m.control ? 'live' : 'live · view only'); for (const id of ['reload', 'go']) $(id).disabled = !m.control; urlBox.readOnly = !m.control; }
    else if (m.t === 'state') renderState(m);
    else if (m.t === 'copied') copied(m.text);
    else if (m.t === 'error') setStatus(m.message);
  };
  ws.onclose = (e) => {
    live.open = false;
    if (e.code === 1008 || e.code === 4401) { setStatus('not allowed: ' + e.reason); return; }
    setStatus('disconnected' + (e.reason ? ': ' + e.reason : '') + ', reconnecting…');
    setTimeout(connect, Math.min(5000, 250 * 2 ** retry++));
  };
}

// Input: coordinates as a fraction of the frame.
function mods(e) { return (e.altKey ? 1 : 0) | (e.ctrlKey ? 2 : 0) | (e.metaKey ? 4 : 0) | (e.shiftKey ? 8 : 0); }
function pos(e) {
  const r = canvas.getBoundingClientRect();
  return { x: Math.min(1, Math.max(0, (e.clientX - r.left) / r.width)), y: Math.min(1, Math.max(0, (e.clientY - r.top) / r.height)) };
}
const BUTTONS = ['left', 'middle', 'right', 'back', 'forward'];
let pendingMove = null;
canvas.addEventListener('mousemove', (e) => {
  if (!live.control) return;
  const first = pendingMove === null;
  pendingMove = { t: 'move', ...pos(e), mods: mods(e) };
  if (first) requestAnimationFrame(() => { const m = pendingMove; pendingMove = null; if (m) send(m); });
});
canvas.addEventListener('mousedown', (e) => {
  if (!live.control) return;
  e.preventDefault();
  kb.focus({ preventScroll: true });
  send({ t: 'down', ...pos(e), button: BUTTONS[e.button] || 'left', clicks: Math.min(3, Math.max(1, e.detail || 1)), mods: mods(e) });
});
window.addEventListener('mouseup', (e) => {
  if (!live.control || e.target !== canvas) return;
  send({ t: 'up', ...pos(e), button: BUTTONS[e.button] || 'left', clicks: Math.min(3, Math.max(1, e.detail || 1)), mods: mods(e) });
});
canvas.addEventListener('contextmenu', (e) => e.preventDefault());
canvas.addEventListener('wheel', (e) => {
  if (!live.control) return;
  e.preventDefault();
  const k = e.deltaMode === 1 ? 40 : e.deltaMode === 2 ? 800 : 1;
  send({ t: 'wheel', ...pos(e), dx: e.deltaX * k, dy: e.deltaY * k, mods: mods(e) });
}, { passive: false });

function keyMsg(t, e) {
  const printable = [...e.key].length === 1 && !e.ctrlKey && !e.metaKey;
  const text = t === 'keydown' ? (printable ? e.key : e.key === 'Enter' ? '\\r' : undefined) : undefined;
  return { t, key: e.key.slice(0, 32), code: (e.code || '').slice(0, 32), keyCode: e.keyCode & 255, text, location: e.location, mods: mods(e) };
}
kb.addEventListener('keydown', (e) => {
  if (!live.control || e.isComposing || e.key === 'Process' || e.key === 'Dead' || e.key === 'Unidentified') return;
  const accel = e.ctrlKey || e.metaKey;
  if (accel && (e.key === 'v' || e.key === 'V')) return; // the paste event follows with the viewer's clipboard
  e.preventDefault();
  send(keyMsg('keydown', e));
  if (accel && (e.key === 'c' || e.key === 'C' || e.key === 'x' || e.key === 'X')) send({ t: 'copy' });
});
kb.addEventListener('keyup', (e) => {
  if (!live.control || e.isComposing || e.key === 'Process' || e.key === 'Dead' || e.key === 'Unidentified') return;
  if ((e.ctrlKey || e.metaKey) && (e.key === 'v' || e.key === 'V')) return;
  e.preventDefault();
  send(keyMsg('keyup', e));
});
kb.addEventListener('compositionend', (e) => { if (e.data) send({ t: 'text', text: e.data }); kb.value = ''; });
// Text that came without a key press we forwarded (an on-screen keyboard, dictation, a character the layout lacks).
kb.addEventListener('input', (e) => { if (e.isComposing) return; if (e.inputType === 'insertText' && e.data) send({ t: 'text', text: e.data }); kb.value = ''; });
document.addEventListener('paste', (e) => {
  if (!live.control || document.activeElement === urlBox) return;
  const text = e.clipboardData ? e.clipboardData.getData('text/plain') : '';
  e.preventDefault();
  if (text) send({ t: 'text', text });
});

$('back').onclick = () => send({ t: 'back' });
$('forward').onclick = () => send({ t: 'forward' });
$('reload').onclick = () => send({ t: 'reload' });
$('go').onclick = () => { if (urlBox.value.trim()) send({ t: 'navigate', url: urlBox.value.trim() }); };
urlBox.addEventListener('keydown', (e) => { if (e.key === 'Enter') { $('go').click(); urlBox.blur(); } });
layout();
connect();
`;

/** The live view page (the same bytes for every viewer; the token travels in its URL, not in it). */
export const LIVE_PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<meta name="referrer" content="no-referrer"><title>Live view · browserd</title><style>${STYLE}</style></head>
<body><div id="top"><div id="tabs"></div><div id="bar">
<button id="back" title="Back" disabled>&#8592;</button><button id="forward" title="Forward" disabled>&#8594;</button><button id="reload" title="Reload" disabled>&#8635;</button>
<input id="url" spellcheck="false" autocomplete="off" aria-label="Address"><button id="go" title="Go" disabled>Go</button><span id="status"></span>
</div></div>
<div id="stage"><canvas id="screen" tabindex="-1"></canvas></div><textarea id="kb" aria-label="keyboard input" autocapitalize="off" autocomplete="off" spellcheck="false"></textarea><div id="toast"></div>
<script>${SCRIPT}</script></body></html>`;

/** Its Content-Security-Policy: nothing from anywhere but its own origin's WebSocket. */
export const LIVE_PAGE_CSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data: blob:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors *";
