// @no-chromium: starts no Chromium (checked by test/run.mjs): may run beside a @serial file.
// A new session's capabilities (daemon/webdriver/caps.ts), as a unit: the debugger address added
// where the client keeps goog:chromeOptions, every launch option refused with one detail each.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { attachCapabilities, attachSessionBody } from '../../daemon/webdriver/caps.js';
import { BadRequestError } from '../../daemon/core/errors.js';
import { DEBUGGER_ADDRESS } from '../../daemon/webdriver/ports.js';

const details = (fn: () => unknown): string[] => {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof BadRequestError);
    return (err.toBody().details ?? []).map((d) => d.message);
  }
  assert.fail('not refused');
};

test('the debugger address goes to alwaysMatch, or to every firstMatch entry when the client keeps its options there', () => {
  assert.deepEqual(attachCapabilities(undefined, 'capabilities'), { alwaysMatch: { 'goog:chromeOptions': { debuggerAddress: DEBUGGER_ADDRESS } } });
  assert.deepEqual(attachCapabilities({ alwaysMatch: { browserName: 'chrome', 'goog:chromeOptions': { w3c: true } } }, 'c').alwaysMatch, {
    browserName: 'chrome',
    'goog:chromeOptions': { w3c: true, debuggerAddress: DEBUGGER_ADDRESS },
  });
  const split = attachCapabilities({ firstMatch: [{ 'goog:chromeOptions': { windowTypes: ['webview'] } }, {}] }, 'c');
  assert.equal(split.alwaysMatch, undefined);
  assert.deepEqual(split.firstMatch, [
    { 'goog:chromeOptions': { windowTypes: ['webview'], debuggerAddress: DEBUGGER_ADDRESS } },
    { 'goog:chromeOptions': { debuggerAddress: DEBUGGER_ADDRESS } },
  ]);
});

test('launch options, another debugger address and a proxy are refused, one detail each, wherever they are', () => {
  const got = details(() =>
    attachSessionBody({
      capabilities: {
        alwaysMatch: { proxy: { proxyType: 'manual' }, 'goog:chromeOptions': { binary: '/bin/sh', extensions: ['eA=='] } },
        firstMatch: [{ 'goog:chromeOptions': { args: ['--no-sandbox'], debuggerAddress: '10.0.0.1:9222', androidPackage: 'x' } }],
      },
    }),
  );
  assert.equal(got.length, 6);
  for (const want of [/alwaysMatch\.proxy/, /alwaysMatch\.goog:chromeOptions\.binary/, /alwaysMatch\.goog:chromeOptions\.extensions/, /firstMatch\[0\]\.goog:chromeOptions\.args/, /firstMatch\[0\]\.goog:chromeOptions\.debuggerAddress/, /firstMatch\[0\]\.goog:chromeOptions\.androidPackage/]) {
    assert.ok(got.some((m) => want.test(m)), `${want} in ${got.join('; ')}`);
  }
  assert.match(details(() => attachSessionBody({ desiredCapabilities: { 'goog:chromeOptions': { args: [] } } }))[0] ?? '', /^desiredCapabilities\.goog:chromeOptions\.args/);
  assert.match(details(() => attachCapabilities({ firstMatch: [] }, 'params.capabilities'))[0] ?? '', /^params\.capabilities\.firstMatch: must be a non-empty array/);
  assert.match(details(() => attachSessionBody([]))[0] ?? '', /^body: must be a JSON object/);
});
