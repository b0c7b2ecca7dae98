// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// The key table of the computer controls: xdotool's key names and combinations to DOM key, code,
// virtual key code, text and modifier bits (unit test, no daemon).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { charKey, effective, keyByName, MOD, parseCombo, splitCombo, type KeyDef } from '../../daemon/computer/keys.js';

const key = (name: string): KeyDef => {
  const def = keyByName(name);
  assert.ok(def, `${name} is a key`);
  return def;
};
const brief = (d: KeyDef): string => `${d.key}|${d.code}|${d.keyCode}|${JSON.stringify(d.text)}|${d.location}${d.needsShift ? '|shift' : ''}${d.modifier ? `|mod${d.modifier}` : ''}`;

test('X keysym names of the named keys map to the DOM key, code and virtual key code', () => {
  const cases: [string, string][] = [
    ['Return', 'Enter|Enter|13|"\\r"|0'],
    ['KP_Enter', 'Enter|NumpadEnter|13|"\\r"|3'],
    ['Tab', 'Tab|Tab|9|""|0'],
    ['ISO_Left_Tab', 'Tab|Tab|9|""|0|shift'],
    ['BackSpace', 'Backspace|Backspace|8|""|0'],
    ['Escape', 'Escape|Escape|27|""|0'],
    ['Delete', 'Delete|Delete|46|""|0'],
    ['Home', 'Home|Home|36|""|0'],
    ['End', 'End|End|35|""|0'],
    ['Page_Up', 'PageUp|PageUp|33|""|0'],
    ['Page_Down', 'PageDown|PageDown|34|""|0'],
    ['Prior', 'PageUp|PageUp|33|""|0'],
    ['Left', 'ArrowLeft|ArrowLeft|37|""|0'],
    ['Up', 'ArrowUp|ArrowUp|38|""|0'],
    ['Right', 'ArrowRight|ArrowRight|39|""|0'],
    ['Down', 'ArrowDown|ArrowDown|40|""|0'],
    ['F1', 'F1|F1|112|""|0'],
    ['F12', 'F12|F12|123|""|0'],
    ['F24', 'F24|F24|135|""|0'],
    ['Shift_L', 'Shift|ShiftLeft|16|""|1|mod8'],
    ['Shift_R', 'Shift|ShiftRight|16|""|2|mod8'],
    ['Control_L', 'Control|ControlLeft|17|""|1|mod2'],
    ['Alt_R', 'Alt|AltRight|18|""|2|mod1'],
    ['Super_L', 'Meta|MetaLeft|91|""|1|mod4'],
    ['KP_7', '7|Numpad7|103|"7"|3'],
    ['KP_Add', '+|NumpadAdd|107|"+"|3'],
    ['Menu', 'ContextMenu|ContextMenu|93|""|0'],
  ];
  for (const [name, want] of cases) assert.equal(brief(key(name)), want, name);
});

test('characters and their keysym names: US layout keys, Shift for capitals and shifted symbols', () => {
  const cases: [string, string][] = [
    ['a', 'a|KeyA|65|"a"|0'],
    ['A', 'A|KeyA|65|"A"|0|shift'],
    ['z', 'z|KeyZ|90|"z"|0'],
    ['7', '7|Digit7|55|"7"|0'],
    ['space', ' |Space|32|" "|0'],
    ['comma', ',|Comma|188|","|0'],
    ['period', '.|Period|190|"."|0'],
    ['slash', '/|Slash|191|"/"|0'],
    ['minus', '-|Minus|189|"-"|0'],
    ['exclam', '!|Digit1|49|"!"|0|shift'],
    ['at', '@|Digit2|50|"@"|0|shift'],
    ['parenleft', '(|Digit9|57|"("|0|shift'],
    ['question', '?|Slash|191|"?"|0|shift'],
    ['quotedbl', '"|Quote|222|"\\""|0|shift'],
    ['backslash', '\\|Backslash|220|"\\\\"|0'],
    ['asciitilde', '~|Backquote|192|"~"|0|shift'],
    ['plus', '+|Equal|187|"+"|0|shift'],
    [',', ',|Comma|188|","|0'],
    ['é', 'é||0|"é"|0'],
  ];
  for (const [name, want] of cases) assert.equal(brief(key(name)), want, name);
});

test('aliases and any case for multi-letter names; single letters keep their case', () => {
  assert.equal(key('ctrl'), key('Control_L'));
  assert.equal(key('Ctrl'), key('Control_L'));
  assert.equal(key('CONTROL'), key('Control_L'));
  assert.equal(key('shift'), key('Shift_L'));
  assert.equal(key('Alt'), key('Alt_L'));
  assert.equal(key('super'), key('Super_L'));
  assert.equal(key('cmd'), key('Super_L'));
  assert.equal(key('Enter'), key('Return'));
  assert.equal(key('return'), key('Return'));
  assert.equal(key('esc'), key('Escape'));
  assert.equal(key('Backspace'), key('BackSpace'));
  assert.equal(key('PageDown'), key('Page_Down'));
  assert.equal(key('page_up'), key('Page_Up'));
  assert.equal(key('ArrowUp'), key('Up'));
  assert.equal(key('f5'), key('F5'));
  assert.notEqual(key('a'), key('A'));
  assert.equal(keyByName('Foo'), null);
  assert.equal(keyByName('F25'), null);
  assert.equal(keyByName(''), null);
  assert.equal(keyByName('\n'), null);
});

test('combinations: split on +, + itself as plus or a trailing ++, unknown parts named', () => {
  assert.deepEqual(splitCombo('ctrl+shift+t'), ['ctrl', 'shift', 't']);
  assert.deepEqual(splitCombo('ctrl++'), ['ctrl', '+']);
  assert.deepEqual(splitCombo('+'), ['+']);
  const ok = parseCombo('Ctrl+Shift+Tab');
  assert.ok('keys' in ok);
  assert.deepEqual(ok.keys.map((k) => k.code), ['ControlLeft', 'ShiftLeft', 'Tab']);
  const bad = parseCombo('ctrl+Foo');
  assert.ok('problem' in bad);
  assert.match(bad.problem, /"Foo" is not a key name/);
  const empty = parseCombo('ctrl+');
  assert.ok('problem' in empty);
  assert.match(empty.problem, /empty part/);
});

test('the key and text with modifiers held: Shift gives the shifted character, Ctrl/Alt/Meta type nothing', () => {
  assert.deepEqual(effective(key('a'), 0), { key: 'a', text: 'a' });
  assert.deepEqual(effective(key('a'), MOD.shift), { key: 'A', text: 'A' });
  assert.deepEqual(effective(key('1'), MOD.shift), { key: '!', text: '!' });
  assert.deepEqual(effective(key('a'), MOD.ctrl), { key: 'a', text: '' });
  assert.deepEqual(effective(key('t'), MOD.ctrl | MOD.shift), { key: 'T', text: '' });
  assert.deepEqual(effective(key('Return'), MOD.shift), { key: 'Enter', text: '\r' });
  assert.deepEqual(effective(key('Tab'), 0), { key: 'Tab', text: '' });
});

test('typing: line breaks are Enter, tabs Tab, other characters their own key', () => {
  assert.equal(charKey('\n'), key('Return'));
  assert.equal(charKey('\r\n'), key('Return'));
  assert.equal(charKey('\t'), key('Tab'));
  assert.equal(brief(charKey('你')), '你||0|"你"|0');
  assert.equal(brief(charKey('😀')), '😀||0|"😀"|0');
});
