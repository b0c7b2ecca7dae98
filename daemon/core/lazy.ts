// A value made on first use and kept: `const body = lazy(() => z.object(…))`, read as `body()`.
// The daemon's zod schemas are made this way, so that a start builds none of them (building every
// route's schemas at import was ~half of the CPU to `listening`, bench/ANALYSIS.md §7); each is
// built once, by the first request (or the OpenAPI document) that needs it.

/** `make` run once, at the first call; every call returns that value. */
export function lazy<T>(make: () => T): () => T {
  let made = false;
  let value: T;
  return () => {
    if (!made) {
      value = make();
      made = true;
    }
    return value;
  };
}
