// What the daemon and a Playwright runner say to each other: JSON lines. The daemon writes to the
// runner's stdin (first `hello`, with the runner's own CDP token: never in argv or the environment,
// both readable by other local processes through /proc), the runner answers on its fd 3 (its
// stdout and stderr stay free for what Node itself writes there, e.g. a fatal heap error).
// One execution at a time: `output` lines stream the code's console while it runs (so output
// written before a timeout or a crash is not lost), `result` ends it.

/** The runner's fd that carries its answers. */
export const ANSWER_FD = 3;

export interface HelloMessage {
  type: 'hello';
  /** A token with only the `cdp` scope, revoked when the runner exits. */
  token: string;
  /** ws://<daemon>/browsers/{id}/cdp */
  cdp_url: string;
  /** The daemon's downloads folder: Playwright's artifacts folder, so that a download the code makes lands where the daemon serves it. */
  downloads_dir: string;
  /** stdout and stderr forwarded per execution, each; the rest is only counted. */
  output_limit_bytes: number;
  /** The JSON of a result, at most. */
  result_limit_bytes: number;
  /** A named executor's runner: its code runs in a tab of its own (else the first open page, shared). */
  own_tab: boolean;
}

export interface ExecuteMessage {
  type: 'execute';
  id: number;
  code: string;
  /** The tab the executor had (a runner that replaces a dead one takes it over while it is open). */
  target_id?: string;
}

/** The tab an execution ran in. */
export interface TabInfo {
  target_id: string;
  url: string;
  /** The runner opened it for this execution (the executor's first, or its tab was gone). */
  created: boolean;
}

export type ToRunner = HelloMessage | ExecuteMessage;

export interface OutputMessage {
  type: 'output';
  id: number;
  stream: 'stdout' | 'stderr';
  data: string;
}

export interface ResultMessage {
  type: 'result';
  id: number;
  success: boolean;
  /** The returned value (absent when the code returned undefined, and on failure). */
  result?: unknown;
  error?: string;
  /** The code did not run: Chromium could not be reached (why). */
  unavailable?: string;
  /** Bytes written past the output limit, counted but not forwarded. */
  stdout_truncated_bytes: number;
  stderr_truncated_bytes: number;
  /** The tab the code ran in (absent when the code did not get one). */
  tab?: TabInfo;
}

export type FromRunner = OutputMessage | ResultMessage;
