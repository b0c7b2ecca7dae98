// The output every running exec keeps, together, held to BROWSERD_EXEC_OUTPUT_TOTAL_BYTES: each
// stream of an exec keeps up to BROWSERD_EXEC_OUTPUT_LIMIT_BYTES, but 64 execs × 2 streams × 16 MiB
// would be 2 GiB. Past the total an exec keeps no more output; what it loses is counted in its
// stdout_truncated_bytes / stderr_truncated_bytes, as past its own limit.
export class ExecOutputPool {
  private used = 0;

  constructor(readonly limitBytes: number) {}

  /** Bytes kept by every running exec now. */
  get usedBytes(): number {
    return this.used;
  }

  /** Takes up to `bytes`; returns how many were granted (0 when the pool is spent). */
  take(bytes: number): number {
    const granted = Math.max(0, Math.min(bytes, this.limitBytes - this.used));
    this.used += granted;
    return granted;
  }

  release(bytes: number): void {
    this.used = Math.max(0, this.used - bytes);
  }
}
