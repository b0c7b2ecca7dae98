// The `extensions` list of an upload, from the multipart field names every generated client
// sends: repeated pairs `extensions.name` + `extensions.zip_file` (Go) or `extensions[][name]` +
// `extensions[][zip_file]` (TypeScript, Python), paired k-th name with k-th archive; or indexed
// `extensions[N][name]` / `extensions[N].name` with `extensions[N][zip_file]` / `extensions[N].zip_file`.
// Either order within a pair. Every problem becomes one `details` entry of a 400 bad_request.
import { BadRequestError } from '../core/errors.js';
import { isValidName, NAME_RE } from './store.js';

export interface ReceivedPart {
  fieldName: string;
  kind: 'field' | 'file';
  /** The value of a plain field. */
  value?: string;
  /** Where a file part was stored (undefined for a file part that was not kept). */
  file?: string;
}

export interface UploadItem {
  /** How the client addressed the item, for messages: `extensions[2]`. */
  label: string;
  name: string;
  zipFile: string;
}

const FIELD_RE = /^extensions(?:\[(\d{0,6})\])?(?:\.(name|zip_file)|\[(name|zip_file)\])$/;

export interface ParsedField {
  field: 'name' | 'zip_file';
  /** null for the repeated encodings (`extensions.name`, `extensions[][name]`). */
  index: number | null;
}

export function parseFieldName(fieldName: string): ParsedField | null {
  const m = FIELD_RE.exec(fieldName);
  if (!m) return null;
  const field = (m[2] ?? m[3]) as 'name' | 'zip_file';
  return { field, index: m[1] === undefined || m[1] === '' ? null : Number(m[1]) };
}

interface Slot {
  label: string;
  names: ReceivedPart[];
  files: ReceivedPart[];
}

export function pairParts(parts: ReceivedPart[], maxItems: number): UploadItem[] {
  const problems: string[] = [];
  const indexed = new Map<number, Slot>();
  const repeatedNames: ReceivedPart[] = [];
  const repeatedFiles: ReceivedPart[] = [];
  for (const part of parts) {
    const f = parseFieldName(part.fieldName);
    if (f === null) {
      problems.push(`${part.fieldName}: is not a field of this request (expected extensions[N][name] and extensions[N][zip_file], or repeated extensions[][name] / extensions.name pairs)`);
      continue;
    }
    if (f.field === 'name' && part.kind !== 'field') problems.push(`${part.fieldName}: must be a text field, not a file`);
    if (f.field === 'zip_file' && part.kind !== 'file') problems.push(`${part.fieldName}: must be a file part (with a filename)`);
    if (f.index === null) {
      (f.field === 'name' ? repeatedNames : repeatedFiles).push(part);
    } else {
      let slot = indexed.get(f.index);
      if (!slot) indexed.set(f.index, (slot = { label: `extensions[${f.index}]`, names: [], files: [] }));
      (f.field === 'name' ? slot.names : slot.files).push(part);
    }
  }
  if (indexed.size > 0 && repeatedNames.length + repeatedFiles.length > 0) {
    problems.push('extensions: mixes indexed (extensions[N]...) and repeated (extensions[]... or extensions....) fields; use one encoding');
  }
  const slots: Slot[] = [...indexed.entries()].sort((a, b) => a[0] - b[0]).map(([, s]) => s);
  const repeatedCount = Math.max(repeatedNames.length, repeatedFiles.length);
  for (let k = 0; k < repeatedCount; k++) {
    const n = repeatedNames[k];
    const f = repeatedFiles[k];
    slots.push({ label: `extensions[${k}]`, names: n ? [n] : [], files: f ? [f] : [] });
  }

  if (slots.length === 0 && problems.length === 0) problems.push('extensions: the list is empty; send at least one item with name and zip_file');
  if (slots.length > maxItems) problems.push(`extensions: ${slots.length} items; at most ${maxItems} are allowed per request`);

  const items: UploadItem[] = [];
  const seen = new Map<string, string>();
  for (const slot of slots) {
    if (slot.names.length === 0) problems.push(`${slot.label}.name: is missing (an archive without its name)`);
    if (slot.files.length === 0) problems.push(`${slot.label}.zip_file: is missing (a name without its archive)`);
    if (slot.names.length > 1) problems.push(`${slot.label}.name: is given ${slot.names.length} times`);
    if (slot.files.length > 1) problems.push(`${slot.label}.zip_file: is given ${slot.files.length} times`);
    const name = slot.names[0]?.value;
    const file = slot.files[0]?.file;
    if (name === undefined || slot.names.length !== 1) continue;
    if (!isValidName(name)) {
      problems.push(`${slot.label}.name: ${JSON.stringify(name.slice(0, 80))} must match ${NAME_RE.source} and not be "." or ".."`);
      continue;
    }
    const first = seen.get(name);
    if (first !== undefined) {
      problems.push(`${slot.label}.name: "${name}" is already used by ${first} in this request`);
      continue;
    }
    seen.set(name, slot.label);
    if (file !== undefined && slot.files.length === 1) items.push({ label: slot.label, name, zipFile: file });
  }
  if (problems.length > 0) throw new BadRequestError(problems);
  return items;
}
