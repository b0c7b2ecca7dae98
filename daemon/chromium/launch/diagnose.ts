// Turns a failed launch into a message an operator can act on: known causes (missing binary,
// no display, profile in use, managed policy that turns DevTools off) get their own words; every
// message ends with the gist of Chromium's last stderr lines.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describeExit, type LaunchError } from './launcher.js';

interface Diagnosis {
  message: string;
  /** true when retrying cannot help until an operator acts (the browser goes straight to `failed`). */
  permanent: boolean;
}

interface DiagnoseContext {
  binary: string;
  profileDir: string;
  policyDir: string;
  readyTimeoutMs: number;
}

/** Chromium's exit code when another Chromium holds the profile (ProcessSingleton). */
export const EXIT_PROFILE_IN_USE = 21;
/** What Chromium prints when neither its namespace sandbox nor a setuid helper can start. */
const SANDBOX_FAILURE_RE = /No usable sandbox|Failed to move to new namespace|zygote_host_impl_linux\.cc.*(?:namespace|sandbox)/i;
/** Lines Chromium prints on every start on a VM without D-Bus: no clue, only noise. */
const NOISE_RE = /dbus\/|Failed to connect to the bus|^\s*$/;
/** Chromium's log prefix: [pid:tid:mmdd/hhmmss.us:LEVEL:file.cc:line] */
const PREFIX_RE = /^\[\d+:\d+:[^\]]*\]\s*/;

export function explainLaunchFailure(err: LaunchError, ctx: DiagnoseContext): Diagnosis {
  const gist = stderrGist(err.output);
  const withGist = (m: string): string => (gist === '' ? m : `${m}; last stderr: ${gist}`);
  if (err.kind === 'spawn') {
    if (err.extra.errno === 'ENOENT') {
      return { message: `the Chromium binary ${ctx.binary} does not exist (ENOENT): install chromium or set BROWSERD_CHROMIUM`, permanent: true };
    }
    if (err.extra.errno === 'EACCES') {
      return { message: `the Chromium binary ${ctx.binary} cannot be executed (EACCES): check its mode or set BROWSERD_CHROMIUM`, permanent: true };
    }
    return { message: `cannot start ${ctx.binary}: ${err.message}`, permanent: false };
  }
  if (err.kind === 'aborted') return { message: 'the launch was abandoned: browserd is stopping', permanent: false };
  if (err.output.some((l) => SANDBOX_FAILURE_RE.test(l))) {
    return {
      message: withGist(
        "Chromium's sandbox cannot start: it needs user namespaces for unprivileged users (sysctl kernel.unprivileged_userns_clone=1 where the kernel has it, and user.max_user_namespaces above 0); " +
          'enable them, or opt out with BROWSERD_CHROMIUM_SANDBOX=false (renderers then run without a sandbox)',
      ),
      permanent: true,
    };
  }
  if (err.output.some((l) => l.includes('Missing X server or $DISPLAY'))) {
    return {
      message: withGist('no display: headful Chromium (BROWSERD_HEADLESS=false) needs an X server; set DISPLAY for the daemon or run headless'),
      permanent: false,
    };
  }
  if (err.extra.exit?.code === EXIT_PROFILE_IN_USE) {
    return {
      message: withGist(`the profile ${ctx.profileDir} is in use by another Chromium (ProcessSingleton, exit code ${EXIT_PROFILE_IN_USE})`),
      permanent: false,
    };
  }
  if (err.kind === 'timeout') {
    const policy = blockingPolicy(ctx.policyDir);
    if (policy !== null) return { message: policy, permanent: true };
    return {
      message: withGist(`Chromium did not answer Browser.getVersion on its DevTools pipe within ${ctx.readyTimeoutMs} ms`),
      permanent: false,
    };
  }
  if (err.kind === 'exit' && err.extra.exit) {
    return { message: withGist(`Chromium exited ${describeExit(err.extra.exit)} before it was ready`), permanent: false };
  }
  return { message: withGist(`Chromium did not become ready: ${err.message}`), permanent: false };
}

/** The last `n` informative stderr lines, without Chromium's log prefix, quoted and joined. */
export function stderrGist(lines: readonly string[], n = 3, maxChars = 200): string {
  const useful = lines.filter((l) => !NOISE_RE.test(l)).map((l) => l.replace(PREFIX_RE, '').trim());
  return useful
    .slice(-n)
    .map((l) => JSON.stringify(l.length > maxChars ? `${l.slice(0, maxChars)}…` : l))
    .join(' | ');
}

/**
 * A managed policy in `policyDir` that keeps browserd from using DevTools, as a message naming
 * the policy and its file; null when there is none. Files that are not JSON objects are skipped
 * (they are Chromium's to judge).
 */
export function blockingPolicy(policyDir: string): string | null {
  let names: string[];
  try {
    names = readdirSync(policyDir).filter((n) => n.endsWith('.json')).sort();
  } catch {
    return null;
  }
  for (const name of names) {
    const file = path.join(policyDir, name);
    let json: unknown;
    try {
      json = JSON.parse(readFileSync(file, 'utf8'));
    } catch {
      continue;
    }
    if (typeof json !== 'object' || json === null) continue;
    const p = json as Record<string, unknown>;
    if (p.RemoteDebuggingAllowed === false) {
      return `managed policy RemoteDebuggingAllowed=false in ${file} turns Chromium's DevTools endpoint off; browserd needs it: remove that policy`;
    }
    if (p.DeveloperToolsAvailability === 2) {
      return `managed policy DeveloperToolsAvailability=2 in ${file} blocks DevTools from attaching to pages; browserd needs it: remove that policy or allow DevTools`;
    }
  }
  return null;
}
