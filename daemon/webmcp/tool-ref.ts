// A tool_ref: which tool of which frame of which page, as one opaque string (base64url of a JSON
// array). It names the page by its CDP target id, so a ref outlives nothing: the page gone, or the
// tool no longer registered there, and the ref answers 404.
import { BadRequestError } from '../core/errors.js';

export interface ToolRef {
  targetId: string;
  frameId: string;
  name: string;
}

export function encodeToolRef(ref: ToolRef): string {
  return Buffer.from(JSON.stringify([ref.targetId, ref.frameId, ref.name])).toString('base64url');
}

export function decodeToolRef(text: string): ToolRef {
  let parts: unknown;
  try {
    parts = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'));
  } catch {
    parts = null;
  }
  if (!Array.isArray(parts) || parts.length !== 3 || !parts.every((p) => typeof p === 'string' && p !== '')) {
    throw new BadRequestError(['tool_ref: not a tool_ref of GET …/webmcp/tools']);
  }
  const [targetId, frameId, name] = parts as [string, string, string];
  return { targetId, frameId, name };
}
