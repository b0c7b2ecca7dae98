// Every flag browserd passes to Chromium, each with the reason it is there. The daemon owns the
// profile, the DevTools endpoint, headless mode and extension loading; the browser's settings add
// the viewport's flags (settings/viewport.ts, each with its reason there) and a start URL;
// BROWSERD_CHROMIUM_FLAGS (checked in core/config.ts) may add others, then the flags set through the
// API (settings/api-flags.ts), and they go last.
import { viewportFlags } from './settings/viewport.js';
import type { LaunchExtras } from './types.js';

export interface FlagInputs {
  profileDir: string;
  headless: boolean;
  /** config.chromium.extraFlags (already refused when they name an owned flag). */
  extraFlags: readonly string[];
  extras: LaunchExtras;
  /** BROWSERD_CHROMIUM_SANDBOX=false: the operator opted out of Chromium's sandbox. */
  noSandbox: boolean;
  /** The daemon's forwarding proxy on 127.0.0.1 (every request of the browser goes there), or null. */
  proxyPort: number | null;
}

/** The page Chromium opens at start: nothing to load, nothing to fetch. */
const START_URL = 'about:blank';

export function chromiumFlags(i: FlagInputs): string[] {
  const flags: string[] = [
    // A dedicated profile in the agent dir: no other Chromium shares it, and its leftovers are findable.
    `--user-data-dir=${i.profileDir}`,
    // DevTools over the child's fd 3/4 only, never a TCP port: no other local user can reach it,
    // every client goes through the authenticated proxy at /browsers/{id}/cdp (one pipe serves many
    // clients, each with its own session), and Chromium exits when the daemon does (EOF on fd 3).
    '--remote-debugging-pipe',
    // Not --disable-crashpad-for-testing: on Chromium 156 it makes the network service crash and
    // restart ~20 times a second (policy installs never fetch, extension workers die). The two
    // crashpad handlers run outside the group instead; chromiumEnv() puts their database under
    // the profile so the post-stop sweep (profile.ts) finds and ends them by their command line.
    // No first-run wizard, welcome page or default-browser question on a fresh profile.
    '--no-first-run',
    '--no-default-browser-check',
    // No bundled default apps installed into the fresh profile (user and policy extensions still load).
    '--disable-default-apps',
    // No Google account sync on a machine that belongs to no person.
    '--disable-sync',
    // Linux keyrings (gnome-keyring, kwallet) need a desktop session and D-Bus; a VM has neither.
    '--password-store=basic',
    // These VMs have no GPU; software compositing avoids GPU-process start-up failures.
    '--disable-gpu',
    // WebMCP (Chromium 156): pages' document.modelContext tools and the CDP WebMCP domain the
    // webmcp module lists and invokes them with (docs/webmcp.md). An operator's or the API's own
    // --enable-features comes later and replaces this one (the last of a switch wins).
    '--enable-features=WebMCPTesting,DevToolsWebMCPSupport',
  ];
  if (!i.extras.allowBackgroundNetworking) {
    flags.push(
      // No traffic the agent did not cause (variations, safe-browsing lists, translate, ...).
      '--disable-background-networking',
      // No component downloads at start; kept off unless a policy force-install needs the updater.
      '--disable-component-update',
    );
  }
  if (i.proxyPort !== null) {
    flags.push(
      // Every connection goes to the daemon's forwarding proxy, which alone decides direct or
      // upstream (the active stored proxy, its bypass_hosts): the proxy can be switched live.
      `--proxy-server=http://127.0.0.1:${i.proxyPort}`,
      // Loopback too: without this Chromium bypasses the proxy for localhost and 127.0.0.1, so the
      // forwarder's rules (never the daemon's own API port) would not apply there.
      '--proxy-bypass-list=<-loopback>',
      // WebRTC's UDP goes around any HTTP proxy: only proxied (TCP) candidates, so the exit IP is the proxy's.
      '--force-webrtc-ip-handling-policy=disable_non_proxied_udp',
    );
  }
  if (i.headless) {
    // The new headless mode (the full browser without a window); BROWSERD_HEADLESS=false runs headful.
    flags.push('--headless');
  }
  if (i.noSandbox) {
    // Only on the operator's explicit opt-out (a kernel without unprivileged user namespaces):
    // Chromium runs as the agent user, never root, and keeps its sandbox otherwise.
    flags.push('--no-sandbox');
  }
  if (i.extras.extensionPaths.length > 0) {
    // Extensions installed through the API, applied at every launch (a crash restart included).
    flags.push(`--load-extension=${i.extras.extensionPaths.join(',')}`);
  }
  const settings = i.extras.settings;
  if (settings !== undefined) flags.push(...viewportFlags(settings.viewport, i.headless));
  // Never --disable-extensions: installed and policy extensions must load.
  // The operator's flags (BROWSERD_CHROMIUM_FLAGS), then those set through the API: the last of a switch wins.
  flags.push(settings?.startUrl ?? START_URL, ...i.extraFlags, ...(settings?.flags ?? []));
  return flags;
}

const SYSTEMD_VARS = new Set(['NOTIFY_SOCKET', 'WATCHDOG_USEC', 'WATCHDOG_PID', 'LISTEN_FDS', 'LISTEN_PID', 'LISTEN_FDNAMES']);

/** Where Chromium's XDG config lives: inside the profile, so crashpad's `--database=` names it. */
function xdgConfigDirOf(profileDir: string): string {
  return `${profileDir}/xdg-config`;
}

/**
 * The environment Chromium gets: the daemon's, without its own settings (a token among them),
 * with XDG_CONFIG_HOME inside the profile (crashpad's database, otherwise under $HOME/.config),
 * TMPDIR in the agent dir (Chromium leaves org.chromium.Chromium.* there; emptied after every
 * stop, so a run leaves nothing in /tmp), and the agent user's HOME, USER and LOGNAME (HOME is
 * the agent dir: ~/.pki and caches go where that user may write).
 */
export function chromiumEnv(env: NodeJS.ProcessEnv, profileDir: string, tmpDir: string, user?: { name: string; home: string }): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = { XDG_CONFIG_HOME: xdgConfigDirOf(profileDir), TMPDIR: tmpDir };
  if (user !== undefined) Object.assign(out, { HOME: user.home, USER: user.name, LOGNAME: user.name });
  for (const [k, v] of Object.entries(env)) {
    if (k.startsWith('BROWSERD_')) continue; // settings, tokens: not Chromium's business
    if (SYSTEMD_VARS.has(k)) continue; // systemd's, meant for the daemon only
    if (k in out) continue; // set above
    out[k] = v;
  }
  return out;
}
