// A list of `{<text>, <file>}` items in a multipart body, from the field names every generated
// client sends (for the list `extensions` with `name` and `zip_file`):
//   repeated pairs `extensions.name` + `extensions.zip_file` (Go clients), or `extensions[][name]` +
//   `extensions[][zip_file]` (TypeScript, Python clients), paired k-th text with k-th file;
//   indexed `extensions[N][name]` / `extensions[N].name` with `extensions[N][zip_file]` / `extensions[N].zip_file`.
// Either order within a pair. Every problem becomes one `details` entry of a 400 bad_request.
import { BadRequestError } from '../errors.js';
import type { ReceivedPart } from './receive.js';

export interface ListSpec {
  /** The list's field name: `extensions`, `files`. */
  list: string;
  /** The text field of an item: `name`, `dest_path`. */
  text: string;
  /** The file field of an item: `zip_file`, `file`. */
  file: string;
  maxItems: number;
  /** Why a text value is refused (e.g. `must match …`), or null; also duplicates are refused when `unique`. */
  checkText?: (value: string) => string | null;
  /** Two items may not have the same text (extension names). */
  unique?: boolean;
}

interface ListItem {
  /** How the client addressed the item, for messages: `extensions[2]`. */
  label: string;
  text: string;
  /** Where the file part was stored. */
  file: string;
}

interface ParsedField {
  field: 'text' | 'file';
  /** null for the repeated encodings (`extensions.name`, `extensions[][name]`). */
  index: number | null;
}

const escape = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** The item field a multipart field name addresses, or null when it is none of the list's. */
export function parseListField(fieldName: string, spec: Pick<ListSpec, 'list' | 'text' | 'file'>): ParsedField | null {
  const names = `${escape(spec.text)}|${escape(spec.file)}`;
  const m = new RegExp(`^${escape(spec.list)}(?:\\[(\\d{0,6})\\])?(?:\\.(${names})|\\[(${names})\\])$`).exec(fieldName);
  if (!m) return null;
  const field = (m[2] ?? m[3]) === spec.text ? 'text' : 'file';
  return { field, index: m[1] === undefined || m[1] === '' ? null : Number(m[1]) };
}

interface Slot {
  label: string;
  texts: ReceivedPart[];
  files: ReceivedPart[];
}

export function pairListParts(parts: ReceivedPart[], spec: ListSpec): ListItem[] {
  const { list, text, file } = spec;
  const problems: string[] = [];
  const indexed = new Map<number, Slot>();
  const repeatedTexts: ReceivedPart[] = [];
  const repeatedFiles: ReceivedPart[] = [];
  for (const part of parts) {
    const f = parseListField(part.fieldName, spec);
    if (f === null) {
      problems.push(`${part.fieldName}: is not a field of this request (expected ${list}[N][${text}] and ${list}[N][${file}], or repeated ${list}[][${text}] / ${list}.${text} pairs)`);
      continue;
    }
    if (f.field === 'text' && part.kind !== 'field') problems.push(`${part.fieldName}: must be a text field, not a file`);
    if (f.field === 'file' && part.kind !== 'file') problems.push(`${part.fieldName}: must be a file part (with a filename)`);
    if (f.index === null) {
      (f.field === 'text' ? repeatedTexts : repeatedFiles).push(part);
    } else {
      let slot = indexed.get(f.index);
      if (!slot) indexed.set(f.index, (slot = { label: `${list}[${f.index}]`, texts: [], files: [] }));
      (f.field === 'text' ? slot.texts : slot.files).push(part);
    }
  }
  if (indexed.size > 0 && repeatedTexts.length + repeatedFiles.length > 0) {
    problems.push(`${list}: mixes indexed (${list}[N]...) and repeated (${list}[]... or ${list}....) fields; use one encoding`);
  }
  const slots: Slot[] = [...indexed.entries()].sort((a, b) => a[0] - b[0]).map(([, s]) => s);
  const repeatedCount = Math.max(repeatedTexts.length, repeatedFiles.length);
  for (let k = 0; k < repeatedCount; k++) {
    const t = repeatedTexts[k];
    const f = repeatedFiles[k];
    slots.push({ label: `${list}[${k}]`, texts: t ? [t] : [], files: f ? [f] : [] });
  }

  if (slots.length === 0 && problems.length === 0) problems.push(`${list}: the list is empty; send at least one item with ${text} and ${file}`);
  if (slots.length > spec.maxItems) problems.push(`${list}: ${slots.length} items; at most ${spec.maxItems} are allowed per request`);

  const items: ListItem[] = [];
  const seen = new Map<string, string>();
  for (const slot of slots) {
    if (slot.texts.length === 0) problems.push(`${slot.label}.${text}: is missing (a ${file} without its ${text})`);
    if (slot.files.length === 0) problems.push(`${slot.label}.${file}: is missing (a ${text} without its ${file})`);
    if (slot.texts.length > 1) problems.push(`${slot.label}.${text}: is given ${slot.texts.length} times`);
    if (slot.files.length > 1) problems.push(`${slot.label}.${file}: is given ${slot.files.length} times`);
    const value = slot.texts[0]?.value;
    const stored = slot.files[0]?.file;
    if (value === undefined || slot.texts.length !== 1) continue;
    const why = spec.checkText?.(value) ?? null;
    if (why !== null) {
      problems.push(`${slot.label}.${text}: ${JSON.stringify(value.slice(0, 80))} ${why}`);
      continue;
    }
    if (spec.unique === true) {
      const first = seen.get(value);
      if (first !== undefined) {
        problems.push(`${slot.label}.${text}: "${value}" is already used by ${first} in this request`);
        continue;
      }
      seen.set(value, slot.label);
    }
    if (stored !== undefined && slot.files.length === 1) items.push({ label: slot.label, text: value, file: stored });
  }
  if (problems.length > 0) throw new BadRequestError(problems);
  return items;
}

/**
 * While the body is still arriving: the text of the item a file part belongs to, when that text
 * came before it (the order every generated client sends), else null. `received` ends with the
 * file part itself. Indexed items match by index; repeated ones pair the k-th file with the k-th text.
 */
export function textBefore(received: readonly ReceivedPart[], spec: Pick<ListSpec, 'list' | 'text' | 'file'>): string | null {
  const filePart = received.at(-1);
  const f = filePart === undefined ? null : parseListField(filePart.fieldName, spec);
  if (f === null || f.field !== 'file') return null;
  const fields = received.slice(0, -1).map((p) => ({ p, f: parseListField(p.fieldName, spec) }));
  if (f.index !== null) {
    const texts = fields.filter((x) => x.f?.field === 'text' && x.f.index === f.index && x.p.kind === 'field');
    return texts.length === 1 ? (texts[0]?.p.value ?? null) : null;
  }
  const k = fields.filter((x) => x.f?.field === 'file' && x.f.index === null).length;
  const texts = fields.filter((x) => x.f?.field === 'text' && x.f.index === null && x.p.kind === 'field');
  return texts[k]?.p.value ?? null;
}
