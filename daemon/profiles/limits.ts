// The limits of the profiles module (docs/profiles.md names each).
export const PROFILE_LIMITS = {
  /** Stored profiles per project (and for the keys without a project together). */
  maxProfiles: 1000,
  /** The biggest uploaded archive (compressed bytes). */
  maxUploadBytes: 2 * 1024 ** 3,
  /** The unpacked size of one profile (a loaded archive, an upload). */
  maxUnpackedBytes: 8 * 1024 ** 3,
  /** Files and folders in one profile archive. */
  maxEntries: 200_000,
  pageDefault: 100,
  pageMax: 1000,
} as const;
