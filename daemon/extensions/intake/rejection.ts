// Why an uploaded extension is refused. The unzip and manifest steps (and the installer, for an
// id conflict or Chromium's own refusal) throw `Rejection` with a stable cause; the upload route
// turns every rejection of a request into one 422 extension_rejected (a detail per item, the
// first cause as inner_error). Size limits are not rejections: they are 413 payload_too_large
// (PayloadTooLargeError), per the contract.
import { OperationFailedError, type ErrorDetail } from '../../core/errors.js';
import type { ArchiveCause } from '../../core/zip/unzip.js';

type RejectCause =
  | ArchiveCause // the archive itself (core/zip/unzip.ts)
  | 'manifest_missing'
  | 'manifest_invalid'
  | 'id_conflict' // the id equals another item's of the request, or an installed extension's of another name
  | 'chromium_refused'; // Extensions.loadUnpacked answered with an error (Chromium's text in the message)

export class Rejection extends Error {
  constructor(
    readonly causeCode: RejectCause,
    message: string,
  ) {
    super(message);
    this.name = 'Rejection';
  }
}

export interface ItemRejection {
  /** How the client addressed the item: `extensions[2]`. */
  label: string;
  name: string;
  rejection: Rejection;
}

/** One 422 for every rejected item of a request. */
export function rejectedError(items: ItemRejection[]): OperationFailedError {
  const details: ErrorDetail[] = items.map((r) => ({
    code: r.rejection.causeCode,
    message: `${r.label} (${r.name}): ${r.rejection.message}`,
  }));
  const first = items[0] as ItemRejection;
  const message =
    items.length === 1
      ? `extension ${first.name} was rejected: ${first.rejection.message}`
      : `${items.length} extensions were rejected; nothing of the request was installed`;
  return new OperationFailedError('extension_rejected', message, { code: first.rejection.causeCode, message: first.rejection.message }, details);
}
