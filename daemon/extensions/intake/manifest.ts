// manifest.json checks done before anything touches Chromium: the facts Chromium itself would
// refuse the extension for, reported with the file and the field. Also what the activation needs
// to know: the version, the service worker (to verify it runs) and whether policy is required.
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { Rejection } from './rejection.js';

export interface ManifestFacts {
  manifestVersion: 2 | 3;
  name: string;
  version: string;
  /** MV3 `background.service_worker`, relative to the extension root; null without one. */
  serviceWorker: string | null;
  /** `webRequestBlocking`: Chromium grants it only to policy-installed extensions. */
  needsPolicy: boolean;
  /** The manifest's `key` (base64 SubjectPublicKeyInfo), which fixes the extension id; else null. */
  key: string | null;
}

const MANIFEST = 'manifest.json';
/** Chromium's extension version: 1 to 4 dot-separated integers 0-65535, no leading zeros. */
const VERSION_RE = /^(0|[1-9]\d{0,4})(\.(0|[1-9]\d{0,4})){0,3}$/;

export function isChromiumVersion(v: string): boolean {
  return VERSION_RE.test(v) && v.split('.').every((p) => Number(p) <= 65535);
}

function invalid(field: string, why: string): Rejection {
  return new Rejection('manifest_invalid', `${MANIFEST}: ${field}: ${why}`);
}

/**
 * The JSON of one of the extension's files as Chromium reads it (a byte order mark and comments
 * allowed): the object, or null for JSON that is not an object; not JSON is `<rel>: not JSON: …`.
 */
function parseJsonObject(text: string, rel: string): Record<string, unknown> | null {
  let json: unknown;
  try {
    json = JSON.parse(stripJsonComments(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text));
  } catch (err) {
    throw new Rejection('manifest_invalid', `${rel}: not JSON: ${(err as Error).message}`);
  }
  return typeof json === 'object' && json !== null && !Array.isArray(json) ? (json as Record<string, unknown>) : null;
}

/** Reads and checks `<root>/manifest.json`; throws Rejection naming the file and field. */
export async function readManifest(root: string, opts: { allowV2: boolean }): Promise<ManifestFacts> {
  let text: string;
  try {
    text = await readFile(path.join(root, MANIFEST), 'utf8');
  } catch {
    throw new Rejection('manifest_missing', `${MANIFEST} is missing (it must be at the archive's root or in its single top folder)`);
  }
  const m = parseJsonObject(text, MANIFEST);
  if (m === null) throw invalid('(root)', 'must be a JSON object');

  const mv = m.manifest_version;
  if (mv !== 2 && mv !== 3) throw invalid('manifest_version', `must be 2 or 3, got ${JSON.stringify(mv) ?? 'nothing'}`);
  if (mv === 2 && !opts.allowV2) {
    throw invalid('manifest_version', 'Manifest V2 is no longer supported by this Chromium; use manifest_version 3');
  }
  if (typeof m.name !== 'string' || m.name.trim() === '') throw invalid('name', 'must be a non-empty string');
  if (typeof m.version !== 'string') throw invalid('version', `must be a string, got ${JSON.stringify(m.version) ?? 'nothing'}`);
  if (!isChromiumVersion(m.version)) {
    throw invalid('version', `"${m.version}" is not a Chromium version (1 to 4 dot-separated integers 0-65535, no leading zeros)`);
  }
  if (m.key !== undefined && (typeof m.key !== 'string' || !/^[A-Za-z0-9+/=\s]+$/.test(m.key))) {
    throw invalid('key', 'must be a base64 string');
  }

  let serviceWorker: string | null = null;
  const bg = m.background;
  if (bg !== undefined) {
    if (typeof bg !== 'object' || bg === null || Array.isArray(bg)) throw invalid('background', 'must be an object');
    const b = bg as Record<string, unknown>;
    if (b.service_worker !== undefined) {
      if (mv !== 3) throw invalid('background.service_worker', 'needs manifest_version 3');
      serviceWorker = await requireFile(root, 'background.service_worker', b.service_worker);
    }
    if (b.scripts !== undefined) {
      if (!Array.isArray(b.scripts)) throw invalid('background.scripts', 'must be a list of files');
      for (const [i, s] of b.scripts.entries()) await requireFile(root, `background.scripts[${i}]`, s);
    }
    if (b.page !== undefined) await requireFile(root, 'background.page', b.page);
  }
  if (m.content_scripts !== undefined) {
    if (!Array.isArray(m.content_scripts)) throw invalid('content_scripts', 'must be a list');
    for (const [i, cs] of m.content_scripts.entries()) {
      if (typeof cs !== 'object' || cs === null) throw invalid(`content_scripts[${i}]`, 'must be an object');
      for (const kind of ['js', 'css'] as const) {
        const files = (cs as Record<string, unknown>)[kind];
        if (files === undefined) continue;
        if (!Array.isArray(files)) throw invalid(`content_scripts[${i}].${kind}`, 'must be a list of files');
        for (const [j, f] of files.entries()) await requireFile(root, `content_scripts[${i}].${kind}[${j}]`, f);
      }
    }
  }
  await checkLocales(root, m.default_locale);
  const permissions = Array.isArray(m.permissions) ? m.permissions : [];
  return {
    manifestVersion: mv,
    name: m.name,
    version: m.version,
    serviceWorker,
    needsPolicy: permissions.includes('webRequestBlocking'),
    key: typeof m.key === 'string' ? m.key.replace(/\s+/g, '') : null,
  };
}

/**
 * Chromium reads manifest.json with comments allowed (line comments from a double slash, and block
 * comments from slash-star to star-slash, outside strings), but no trailing commas and no raw control characters in strings (measured on
 * Chromium 156): the comments are blanked out (their line breaks kept, so JSON's positions stay
 * right) and the rest is JSON.parse's to judge.
 */
function stripJsonComments(text: string): string {
  let out = '';
  let i = 0;
  while (i < text.length) {
    const c = text[i] as string;
    if (c === '"') {
      let j = i + 1;
      while (j < text.length && text[j] !== '"') j += text[j] === '\\' ? 2 : 1;
      out += text.slice(i, j + 1);
      i = j + 1;
    } else if (c === '/' && text[i + 1] === '/') {
      const end = text.indexOf('\n', i);
      out += ' '.repeat((end < 0 ? text.length : end) - i);
      i = end < 0 ? text.length : end;
    } else if (c === '/' && text[i + 1] === '*') {
      const end = text.indexOf('*/', i + 2);
      if (end < 0) return out + text.slice(i); // unterminated: JSON.parse reports it
      out += text.slice(i, end + 2).replace(/[^\n]/g, ' ');
      i = end + 2;
    } else {
      out += c;
      i++;
    }
  }
  return out;
}

/** A locale folder name as Chromium's `_locales/<locale>/` (en, en_US, pt_BR, zh_CN, es_419). */
const LOCALE_RE = /^[A-Za-z0-9_-]{1,32}$/;

async function isDirectory(p: string): Promise<boolean> {
  try {
    return (await stat(p)).isDirectory();
  } catch {
    return false;
  }
}

/**
 * Chromium refuses `default_locale` without `_locales/` ("Default locale was specified, but
 * _locales subtree is missing") and `_locales/` without `default_locale` ("Localization used, but
 * default_locale wasn't specified"); the default locale's messages.json must be there and parse.
 */
async function checkLocales(root: string, value: unknown): Promise<void> {
  const hasLocales = await isDirectory(path.join(root, '_locales'));
  if (value === undefined) {
    if (hasLocales) throw invalid('default_locale', 'is missing, but the archive has a _locales folder (Chromium needs both or neither)');
    return;
  }
  if (typeof value !== 'string' || !LOCALE_RE.test(value)) throw invalid('default_locale', `must be a locale folder name such as "en", got ${JSON.stringify(value)}`);
  if (!hasLocales) throw invalid('default_locale', `is "${value}", but the archive has no _locales folder`);
  const rel = `_locales/${value}/messages.json`;
  let text: string;
  try {
    text = await readFile(path.join(root, '_locales', value, 'messages.json'), 'utf8');
  } catch {
    throw invalid('default_locale', `is "${value}", but ${rel} is missing`);
  }
  if (parseJsonObject(text, rel) === null) throw new Rejection('manifest_invalid', `${rel}: must be a JSON object`);
}

/** The field names a file inside the extension; returns its path relative to the root. */
async function requireFile(root: string, field: string, value: unknown): Promise<string> {
  if (typeof value !== 'string' || value === '') throw invalid(field, 'must be a file name');
  const rel = path.posix.normalize(value.replace(/^\/+/, ''));
  if (rel.startsWith('..') || value.includes('\0')) throw invalid(field, `"${value}" points outside the extension`);
  let ok: boolean;
  try {
    ok = (await stat(path.join(root, rel))).isFile();
  } catch {
    ok = false;
  }
  if (!ok) throw invalid(field, `names "${value}", which is not a file in the archive`);
  return rel;
}
