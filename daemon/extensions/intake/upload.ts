// The `extensions` list of an upload: the multipart body received into the request's staging
// folder (archives only; every other file part is discarded), then paired into items
// `{name, zip_file}` in every encoding the generated clients send (core/multipart/pairs.ts).
import { mkdir } from 'node:fs/promises';
import type { IncomingMessage } from 'node:http';
import path from 'node:path';
import { parseListField, pairListParts, type ListSpec } from '../../core/multipart/pairs.js';
import { receiveMultipart } from '../../core/multipart/receive.js';
import { isValidName, NAME_RE } from '../store.js';

export interface UploadItem {
  /** How the client addressed the item, for messages: `extensions[2]`. */
  label: string;
  name: string;
  zipFile: string;
}

interface UploadLimits {
  maxItems: number;
  maxArchiveBytes: number;
  maxRequestBytes: number;
}

const FIELDS = { list: 'extensions', text: 'name', file: 'zip_file' } as const;

export function uploadSpec(maxItems: number): ListSpec {
  return {
    ...FIELDS,
    maxItems,
    unique: true,
    checkText: (name) => (isValidName(name) ? null : `must match ${NAME_RE.source} and not be "." or ".."`),
  };
}

export async function receiveUpload(req: IncomingMessage, stagingDir: string, lim: UploadLimits): Promise<UploadItem[]> {
  await mkdir(stagingDir, { recursive: true, mode: 0o700 });
  const parts = await receiveMultipart(
    req,
    {
      maxParts: lim.maxItems,
      maxFileBytes: lim.maxArchiveBytes,
      maxRequestBytes: lim.maxRequestBytes,
      listName: 'extensions',
      fileNoun: 'archive',
      fileSetting: 'BROWSERD_EXTENSION_MAX_ARCHIVE_BYTES',
      requestSetting: 'BROWSERD_EXTENSION_MAX_REQUEST_BYTES',
    },
    (fieldName, index) => (parseListField(fieldName, FIELDS)?.field === 'file' ? path.join(stagingDir, `part-${index}.zip`) : null),
  );
  return pairListParts(parts, uploadSpec(lim.maxItems)).map((i) => ({ label: i.label, name: i.text, zipFile: i.file }));
}
