// Modes and owners as the requests give them: octal mode strings (`644`, `0755`) and owners as a
// user or group name (from /etc/passwd, /etc/group) or a numeric id.
import { readFile } from 'node:fs/promises';
import { BadRequestError } from '../../core/errors.js';

const MODE_RE = /^[0-7]{3,4}$/;
const ID_MAX = 0xfffffffe; // (uid_t)-1 means "unchanged"

/** The permission bits of an octal mode string; setuid and setgid are refused (a root daemon would hand them out). */
export function parseMode(field: string, raw: string | undefined, def: number): number {
  if (raw === undefined) return def;
  if (!MODE_RE.test(raw)) throw BadRequestError.field(field, `must be an octal mode of 3 or 4 digits (e.g. 644, 0755), got ${JSON.stringify(raw.slice(0, 20))}`);
  const mode = parseInt(raw, 8);
  if ((mode & 0o6000) !== 0) throw BadRequestError.field(field, 'setuid and setgid bits are not set through the files API');
  return mode;
}

async function lookup(file: string, name: string): Promise<number | null> {
  const text = await readFile(file, 'utf8').catch(() => '');
  for (const line of text.split('\n')) {
    const f = line.split(':');
    if (f.length >= 3 && f[0] === name) {
      const id = Number(f[2]);
      return Number.isInteger(id) ? id : null;
    }
  }
  return null;
}

/** A user or group as its numeric id: digits are the id itself, a name is looked up. */
export async function parseOwner(field: 'owner' | 'group', raw: string | undefined, files = { passwd: '/etc/passwd', group: '/etc/group' }): Promise<number> {
  if (raw === undefined || raw === '') return -1;
  if (/^\d{1,10}$/.test(raw)) {
    const id = Number(raw);
    if (id > ID_MAX) throw BadRequestError.field(field, `must be at most ${ID_MAX}`);
    return id;
  }
  if (!/^[A-Za-z0-9._][A-Za-z0-9._-]{0,63}\$?$/.test(raw)) throw BadRequestError.field(field, `must be a ${field === 'owner' ? 'user' : 'group'} name or a numeric id`);
  const id = await lookup(field === 'owner' ? files.passwd : files.group, raw);
  if (id === null) throw BadRequestError.field(field, `no ${field === 'owner' ? 'user' : 'group'} named ${JSON.stringify(raw)} on this machine`);
  return id;
}
