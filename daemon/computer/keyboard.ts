// The keyboard of one action: the keys it holds (modifiers first, released last, in reverse) and
// the events Chromium needs for each press. A key that types something is a `keyDown` with its
// text (keydown, keypress, beforeinput, input in the page), any other a `rawKeyDown`; the
// `modifiers` bits of the held keys are set on every event between their press and release.
// Nothing stays held after an action: releaseAll() runs in every action's `finally`.
import type { Deadline } from '../core/deadline.js';
import { charKey, effective, KEY_TEXT_MAX_UNITS, keyByName, MOD, type KeyDef } from './keys.js';
import type { Page } from './page.js';

const SHIFT = keyByName('Shift_L') as KeyDef;

export class Keyboard {
  private readonly held: KeyDef[] = [];

  /** The modifier bits of the held keys. */
  get modifiers(): number {
    return this.held.reduce((m, k) => m | k.modifier, 0);
  }

  /** Presses `def` (and Shift first when its character needs it and Shift is not held). A key already held is not pressed again. */
  async down(page: Page, def: KeyDef, deadline: Deadline): Promise<void> {
    if (this.isHeld(def)) return;
    if (def.needsShift && (this.modifiers & MOD.shift) === 0) await this.down(page, SHIFT, deadline);
    this.held.push(def);
    const modifiers = this.modifiers;
    const { key, text } = effective(def, modifiers);
    await page.send(
      'Input.dispatchKeyEvent',
      {
        type: text === '' ? 'rawKeyDown' : 'keyDown',
        modifiers,
        key,
        code: def.code,
        windowsVirtualKeyCode: def.keyCode,
        nativeVirtualKeyCode: def.keyCode,
        text: text === '' ? undefined : text,
        unmodifiedText: text === '' ? undefined : text,
        location: def.location,
        isKeypad: def.location === 3,
        autoRepeat: false,
      },
      deadline,
    );
  }

  /** Releases every held key, last first; errors are the caller's to ignore (cleanup). */
  async releaseAll(page: Page, deadline: Deadline): Promise<void> {
    while (this.held.length > 0) await this.releaseLast(page, deadline);
  }

  /** Down and up of each key of a combination, in order then in reverse; `holdMs` between. */
  async combo(page: Page, keys: KeyDef[], holdMs: number, deadline: Deadline): Promise<void> {
    const depth = this.held.length;
    for (const k of keys) await this.down(page, k, deadline);
    if (holdMs > 0) await deadline.sleep(holdMs);
    while (this.held.length > depth) await this.releaseLast(page, deadline);
  }

  /**
   * Types `text` one grapheme at a time, as key presses on a US layout (Shift for capitals and
   * shifted symbols, Enter for a line break, Tab for a tab); a character without a key is one key
   * press with that character as `key` and no `code`, and one longer than a key event carries (a
   * composed emoji) is committed with Input.insertText, as an input method would.
   */
  async type(page: Page, text: string, delayMs: number, deadline: Deadline): Promise<void> {
    let first = true;
    for (const { segment } of new Intl.Segmenter().segment(text)) {
      if (!first && delayMs > 0) await deadline.sleep(delayMs);
      first = false;
      const def = charKey(segment);
      if (def.code === '' && segment.length > KEY_TEXT_MAX_UNITS) {
        await page.send('Input.insertText', { text: segment }, deadline);
        continue;
      }
      await this.combo(page, [def], 0, deadline);
    }
  }

  private isHeld(def: KeyDef): boolean {
    return this.held.some((h) => same(h, def));
  }

  private async releaseLast(page: Page, deadline: Deadline): Promise<void> {
    const def = this.held.pop() as KeyDef;
    const modifiers = this.modifiers;
    const { key } = effective(def, modifiers | (def.needsShift ? MOD.shift : 0));
    await page.send(
      'Input.dispatchKeyEvent',
      { type: 'keyUp', modifiers, key, code: def.code, windowsVirtualKeyCode: def.keyCode, nativeVirtualKeyCode: def.keyCode, location: def.location, isKeypad: def.location === 3 },
      deadline,
    );
  }
}

function same(a: KeyDef, b: KeyDef): boolean {
  return a.code !== '' ? a.code === b.code : a.key === b.key;
}
