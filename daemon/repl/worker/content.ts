// What one REPL call answers with, in the order it was made: text on a channel (stdout and stderr:
// console.* and process.stdout/stderr; `result`: the cell's value; `repl.write` picks its own) and
// images (repl.emitImage). Text is kept up to REPL_TEXT_LIMIT_BYTES in all, images up to
// REPL_IMAGE_LIMIT_BYTES in all: past the text limit the rest is cut (content_truncated), an image
// past its limit is refused with an error naming the limit.
import { REPL_IMAGE_LIMIT_BYTES, REPL_TEXT_LIMIT_BYTES } from '../limits.js';

export type ContentItem = { type: 'text'; channel: string; text: string } | { type: 'image'; mime_type: string; data_b64: string };

const IMAGE_TYPES = new Set(['image/png', 'image/jpeg', 'image/webp', 'image/gif']);

export class Content {
  readonly items: ContentItem[] = [];
  private textBytes = 0;
  private imageBytes = 0;
  truncated = false;

  /** Appends text (merged into the last item when that is text of the same channel). */
  text(channel: string, text: string): void {
    if (text === '') return;
    const room = REPL_TEXT_LIMIT_BYTES - this.textBytes;
    let part = text;
    if (Buffer.byteLength(text) > room) {
      this.truncated = true;
      part = Buffer.from(text).subarray(0, Math.max(0, room)).toString('utf8').replace(/\uFFFD$/, '');
    }
    if (part === '') return;
    this.textBytes += Buffer.byteLength(part);
    const last = this.items.at(-1);
    if (last?.type === 'text' && last.channel === channel) last.text += part;
    else this.items.push({ type: 'text', channel, text: part });
  }

  /** Appends an image; throws when its type is unknown or the images' limit would be passed. */
  image(data: Uint8Array | string, mimeType: string): void {
    if (!IMAGE_TYPES.has(mimeType)) throw new TypeError(`repl.emitImage: mime type ${mimeType} is not one of ${[...IMAGE_TYPES].join(', ')}`);
    const bytes = typeof data === 'string' ? Buffer.from(data, 'base64') : Buffer.from(data.buffer, data.byteOffset, data.byteLength);
    if (bytes.length === 0) throw new TypeError('repl.emitImage: the image is empty');
    if (this.imageBytes + bytes.length > REPL_IMAGE_LIMIT_BYTES) {
      throw new RangeError(`repl.emitImage: ${bytes.length} bytes of image would pass REPL_IMAGE_LIMIT_BYTES (${REPL_IMAGE_LIMIT_BYTES} bytes of images per call; ${this.imageBytes} used)`);
    }
    this.imageBytes += bytes.length;
    this.items.push({ type: 'image', mime_type: mimeType, data_b64: bytes.toString('base64') });
  }
}
