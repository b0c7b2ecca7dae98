// An abort signal made only when someone asks for it. Each request has two (its `signal` and its
// `clientGone`), aborted when its response closes; most handlers never read them, and an
// AbortController that is aborted builds a DOMException with a stack trace: with both made and
// aborted at every request, that was ~6% of the CPU of a small stdin write. Same behaviour as an
// AbortController: a signal asked for after the abort is already aborted (with the same reason
// kind, an AbortError), and listeners added before it hear it once.
export class LazyAbort {
  private controller: AbortController | null = null;
  private done = false;

  get signal(): AbortSignal {
    if (this.controller === null) {
      this.controller = new AbortController();
      if (this.done) this.controller.abort();
    }
    return this.controller.signal;
  }

  get aborted(): boolean {
    return this.done;
  }

  abort(): void {
    if (this.done) return;
    this.done = true;
    this.controller?.abort();
  }
}
