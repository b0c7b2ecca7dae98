// Key names → DOM keys. The SDK's `press_key` and `hold_keys` take xdotool's names: X keysym names
// (`Return`, `BackSpace`, `Page_Up`, `KP_Enter`, `comma`, `a`, `A`, …), xdotool's modifier aliases
// (`ctrl`, `shift`, `alt`, `super`, `meta`, any case) and combinations joined by `+` (`ctrl+a`,
// `Ctrl+Shift+Tab`). Each resolves to what Chromium needs for Input.dispatchKeyEvent on a US layout:
// the DOM `key` and `code`, the Windows virtual key code, the text the key types, its location, and
// whether it needs Shift (`A`, `exclam`: pressed with Shift, as xdotool does). Forgiving aliases
// (`Enter`, `Esc`, `Backspace`, `ArrowUp`, `PageDown`, `cmd`, …) and any single character are
// accepted too.

export interface KeyDef {
  /** The DOM `key` without Shift (for a layout key) or as it is (others). */
  key: string;
  /** The DOM `code`; '' for a character that has no key on a US layout. */
  code: string;
  /** windowsVirtualKeyCode (0 for a character without a key). */
  keyCode: number;
  /** What the key types without Shift ('' types nothing). */
  text: string;
  /** With Shift held (layout keys): the key and the text. */
  shifted?: string;
  /** 0 standard, 1 left, 2 right, 3 numpad. */
  location: 0 | 1 | 2 | 3;
  /** The character needs Shift on a US layout (it is pressed with Shift, like xdotool does). */
  needsShift: boolean;
  /** The modifier bit this key sets while held (Input.dispatch*Event `modifiers`). */
  modifier: number;
}

/** Input.dispatch*Event modifier bits. */
export const MOD = { alt: 1, ctrl: 2, meta: 4, shift: 8 } as const;

/** The longest text one key event carries (Chromium's WebKeyboardEvent holds 4 UTF-16 units). */
export const KEY_TEXT_MAX_UNITS = 4;

/** [code, keyCode, unshifted, shifted] of every character key of a US layout. */
const LAYOUT: readonly [string, number, string, string][] = [
  ...[...'abcdefghijklmnopqrstuvwxyz'].map((c): [string, number, string, string] => [`Key${c.toUpperCase()}`, c.toUpperCase().charCodeAt(0), c, c.toUpperCase()]),
  ...[...')!@#$%^&*('].map((s, n): [string, number, string, string] => [`Digit${n}`, 48 + n, String(n), s]),
  ['Space', 32, ' ', ' '],
  ['Minus', 189, '-', '_'],
  ['Equal', 187, '=', '+'],
  ['BracketLeft', 219, '[', '{'],
  ['BracketRight', 221, ']', '}'],
  ['Backslash', 220, '\\', '|'],
  ['Semicolon', 186, ';', ':'],
  ['Quote', 222, "'", '"'],
  ['Comma', 188, ',', '<'],
  ['Period', 190, '.', '>'],
  ['Slash', 191, '/', '?'],
  ['Backquote', 192, '`', '~'],
];

/** A character → its key on a US layout. */
const BY_CHAR = new Map<string, KeyDef>();
for (const [code, keyCode, plain, shifted] of LAYOUT) {
  BY_CHAR.set(plain, { key: plain, code, keyCode, text: plain, shifted, location: 0, needsShift: false, modifier: 0 });
  if (shifted !== plain) BY_CHAR.set(shifted, { key: shifted, code, keyCode, text: shifted, shifted, location: 0, needsShift: true, modifier: 0 });
}

const special = (key: string, code: string, keyCode: number, extra: Partial<KeyDef> = {}): KeyDef => ({ key, code, keyCode, text: '', location: 0, needsShift: false, modifier: 0, ...extra });
const numpad = (key: string, code: string, keyCode: number): KeyDef => ({ key, code, keyCode, text: key, location: 3, needsShift: false, modifier: 0 });

/** X keysym names (case-sensitive, as xdotool takes them) of the keys that are not single characters. */
const KEYSYMS = new Map<string, KeyDef>([
  ['Return', special('Enter', 'Enter', 13, { text: '\r' })],
  ['KP_Enter', { ...numpad('Enter', 'NumpadEnter', 13), text: '\r' }],
  ['Tab', special('Tab', 'Tab', 9)],
  ['ISO_Left_Tab', special('Tab', 'Tab', 9, { needsShift: true })],
  ['BackSpace', special('Backspace', 'Backspace', 8)],
  ['Escape', special('Escape', 'Escape', 27)],
  ['Delete', special('Delete', 'Delete', 46)],
  ['Insert', special('Insert', 'Insert', 45)],
  ['Home', special('Home', 'Home', 36)],
  ['End', special('End', 'End', 35)],
  ['Page_Up', special('PageUp', 'PageUp', 33)],
  ['Prior', special('PageUp', 'PageUp', 33)],
  ['Page_Down', special('PageDown', 'PageDown', 34)],
  ['Next', special('PageDown', 'PageDown', 34)],
  ['Left', special('ArrowLeft', 'ArrowLeft', 37)],
  ['Up', special('ArrowUp', 'ArrowUp', 38)],
  ['Right', special('ArrowRight', 'ArrowRight', 39)],
  ['Down', special('ArrowDown', 'ArrowDown', 40)],
  ['Shift_L', special('Shift', 'ShiftLeft', 16, { location: 1, modifier: MOD.shift })],
  ['Shift_R', special('Shift', 'ShiftRight', 16, { location: 2, modifier: MOD.shift })],
  ['Control_L', special('Control', 'ControlLeft', 17, { location: 1, modifier: MOD.ctrl })],
  ['Control_R', special('Control', 'ControlRight', 17, { location: 2, modifier: MOD.ctrl })],
  ['Alt_L', special('Alt', 'AltLeft', 18, { location: 1, modifier: MOD.alt })],
  ['Alt_R', special('Alt', 'AltRight', 18, { location: 2, modifier: MOD.alt })],
  ['Super_L', special('Meta', 'MetaLeft', 91, { location: 1, modifier: MOD.meta })],
  ['Super_R', special('Meta', 'MetaRight', 92, { location: 2, modifier: MOD.meta })],
  ['Meta_L', special('Meta', 'MetaLeft', 91, { location: 1, modifier: MOD.meta })],
  ['Meta_R', special('Meta', 'MetaRight', 92, { location: 2, modifier: MOD.meta })],
  ['Caps_Lock', special('CapsLock', 'CapsLock', 20)],
  ['Num_Lock', special('NumLock', 'NumLock', 144)],
  ['Scroll_Lock', special('ScrollLock', 'ScrollLock', 145)],
  ['Pause', special('Pause', 'Pause', 19)],
  ['Print', special('PrintScreen', 'PrintScreen', 44)],
  ['Menu', special('ContextMenu', 'ContextMenu', 93)],
  ['KP_Add', numpad('+', 'NumpadAdd', 107)],
  ['KP_Subtract', numpad('-', 'NumpadSubtract', 109)],
  ['KP_Multiply', numpad('*', 'NumpadMultiply', 106)],
  ['KP_Divide', numpad('/', 'NumpadDivide', 111)],
  ['KP_Decimal', numpad('.', 'NumpadDecimal', 110)],
  ['KP_Equal', numpad('=', 'NumpadEqual', 187)],
  ...Array.from({ length: 10 }, (_, n): [string, KeyDef] => [`KP_${n}`, numpad(String(n), `Numpad${n}`, 96 + n)]),
  ...Array.from({ length: 24 }, (_, i): [string, KeyDef] => [`F${i + 1}`, special(`F${i + 1}`, `F${i + 1}`, 112 + i)]),
]);

/** X keysym names of the printable characters (xdotool `key comma`). */
const CHAR_KEYSYMS: Record<string, string> = {
  space: ' ', exclam: '!', quotedbl: '"', numbersign: '#', dollar: '$', percent: '%', ampersand: '&',
  apostrophe: "'", quoteright: "'", parenleft: '(', parenright: ')', asterisk: '*', plus: '+', comma: ',',
  minus: '-', period: '.', slash: '/', colon: ':', semicolon: ';', less: '<', equal: '=', greater: '>',
  question: '?', at: '@', bracketleft: '[', backslash: '\\', bracketright: ']', asciicircum: '^',
  underscore: '_', grave: '`', quoteleft: '`', braceleft: '{', bar: '|', braceright: '}', asciitilde: '~',
};
for (const [name, ch] of Object.entries(CHAR_KEYSYMS)) KEYSYMS.set(name, BY_CHAR.get(ch) as KeyDef);

/** Other spellings, matched without regard to case: xdotool's modifier aliases and the DOM's names. */
const ALIASES: Record<string, string> = {
  ctrl: 'Control_L', control: 'Control_L', shift: 'Shift_L', alt: 'Alt_L', option: 'Alt_L',
  super: 'Super_L', meta: 'Super_L', cmd: 'Super_L', command: 'Super_L', win: 'Super_L', windows: 'Super_L',
  enter: 'Return', esc: 'Escape', backspace: 'BackSpace', del: 'Delete', ins: 'Insert',
  pageup: 'Page_Up', pgup: 'Page_Up', pagedown: 'Page_Down', pgdn: 'Page_Down',
  arrowleft: 'Left', arrowup: 'Up', arrowright: 'Right', arrowdown: 'Down',
  capslock: 'Caps_Lock', numlock: 'Num_Lock', scrolllock: 'Scroll_Lock', printscreen: 'Print', contextmenu: 'Menu',
  controlleft: 'Control_L', controlright: 'Control_R', shiftleft: 'Shift_L', shiftright: 'Shift_R',
  altleft: 'Alt_L', altright: 'Alt_R', metaleft: 'Super_L', metaright: 'Super_R',
};

/** Keysym names in lower case (multi-character names only: `a` and `A` stay different keys). */
const KEYSYMS_LOWER = new Map<string, KeyDef>([...KEYSYMS].filter(([n]) => n.length > 1).map(([n, d]) => [n.toLowerCase(), d]));

/** The key that types `ch` (one grapheme): a US layout key, Enter or Tab, or a character without a key. */
export function charKey(ch: string): KeyDef {
  if (ch === '\n' || ch === '\r' || ch === '\r\n') return KEYSYMS.get('Return') as KeyDef;
  if (ch === '\t') return KEYSYMS.get('Tab') as KeyDef;
  return BY_CHAR.get(ch) ?? { key: ch, code: '', keyCode: 0, text: ch, location: 0, needsShift: false, modifier: 0 };
}

/** One key name, or null when it names no key. */
export function keyByName(name: string): KeyDef | null {
  const exact = KEYSYMS.get(name);
  if (exact !== undefined) return exact;
  const lower = name.toLowerCase();
  const alias = ALIASES[lower];
  if (alias !== undefined) return KEYSYMS.get(alias) as KeyDef;
  const folded = KEYSYMS_LOWER.get(lower);
  if (folded !== undefined) return folded;
  const graphemes = [...new Intl.Segmenter().segment(name)];
  if (graphemes.length === 1 && !/^\p{Cc}$/u.test(name)) return charKey(name);
  return null;
}

/** Splits `ctrl+shift+t` into its names; `+` itself is `plus` or a trailing `+` (`ctrl++`). */
export function splitCombo(item: string): string[] {
  if (item === '+') return ['+'];
  if (item.endsWith('++')) return [...splitCombo(item.slice(0, -2)), '+'];
  return item.split('+');
}

/** A combination of keys (pressed in order, released in reverse), or the problem with it. */
export function parseCombo(item: string): { keys: KeyDef[] } | { problem: string } {
  if (item.length === 0) return { problem: 'is empty' };
  const keys: KeyDef[] = [];
  for (const part of splitCombo(item)) {
    if (part === '') return { problem: `"${item}" has an empty part (write + as "plus")` };
    const def = keyByName(part);
    if (def === null) return { problem: `"${part}" is not a key name (X keysym names such as Return, BackSpace, Page_Up, comma, a, F5; modifiers ctrl, shift, alt, super; combinations such as ctrl+a)` };
    keys.push(def);
  }
  return { keys };
}

/** The key and text `def` gives with the modifiers held: Shift picks the shifted character; Ctrl, Alt or Meta type nothing. */
export function effective(def: KeyDef, modifiers: number): { key: string; text: string } {
  const shift = (modifiers & MOD.shift) !== 0;
  const key = shift && def.shifted !== undefined ? def.shifted : def.key;
  let text = def.text === '' ? '' : shift && def.shifted !== undefined ? def.shifted : def.text;
  if ((modifiers & (MOD.ctrl | MOD.alt | MOD.meta)) !== 0) text = '';
  return { key, text };
}

/** Every key name this table knows, for the OpenAPI description. */
export const KEY_NAME_SUMMARY =
  'X keysym names as xdotool takes them: Return, Tab, BackSpace, Escape, Delete, Insert, Home, End, Page_Up, Page_Down, ' +
  'Left, Up, Right, Down, F1–F24, Shift_L/_R, Control_L/_R, Alt_L/_R, Super_L/_R, Meta_L/_R, Caps_Lock, Num_Lock, ' +
  'Scroll_Lock, Pause, Print, Menu, KP_0–KP_9, KP_Enter, KP_Add, KP_Subtract, KP_Multiply, KP_Divide, KP_Decimal, ' +
  'KP_Equal, the character names (space, exclam, quotedbl, numbersign, dollar, percent, ampersand, apostrophe, ' +
  'parenleft, parenright, asterisk, plus, comma, minus, period, slash, colon, semicolon, less, equal, greater, question, ' +
  'at, bracketleft, backslash, bracketright, asciicircum, underscore, grave, braceleft, bar, braceright, asciitilde) and ' +
  'any single character (a, A, 7, é); case-insensitive aliases: ctrl, control, shift, alt, option, super, meta, cmd, ' +
  'command, win, enter, esc, backspace, del, ins, pageup, pgup, pagedown, pgdn, arrowleft/up/right/down, capslock, ' +
  'printscreen, contextmenu, and the keysym names themselves in any case (return, page_up). Combinations join names ' +
  'with + (ctrl+a, Ctrl+Shift+Tab, ctrl++ for Ctrl and +).';
