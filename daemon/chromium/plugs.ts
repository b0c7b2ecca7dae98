// The browser's extension points, in one place: what other modules add to the browser through
// `browser.use({...})`. A slot has one owner: a second module claiming it is a bug, refused with an
// error naming both (never silently replaced). A list takes every module's, in the order of use().
import type { CdpClientEvents } from '../cdp/bridge.js';
import type { CdpClient } from '../cdp/client.js';
import { composePolicies, type CommandPolicy } from '../cdp/mux.js';
import type { BrowserSnapshot, BrowserState, BrowserUpdatePart, ConfigurePart, LaunchExtras, StopWork } from './types.js';

/** One module's additions to the browser (every field optional). */
export interface BrowserPlug {
  /** Who adds them (the module's name): named when a slot is claimed twice. */
  name: string;

  // Slots: one owner each.
  /** Asked at every launch for the extension paths and networking needs. */
  launchExtras?: () => LaunchExtras;
  /**
   * Asked at every restart (any reason) and at the graceful shutdown for work to run once the whole
   * Chromium tree has stopped, before the next launch (the profiles module: save the profile, put
   * the next one in place); null for none. The work must not throw (errors are logged).
   */
  stopWork?: () => StopWork | null;
  /** Asked at every launch for the forwarding proxy's port (--proxy-server), null for none. */
  proxyPort?: () => number | null;
  // Lists: every module's.
  /**
   * What the daemon keeps for itself of the shared browser (clients' commands refused or rewritten,
   * undone when they leave); from the next launch on. Every module's, composed in the order of use()
   * (the first refusal wins; rewrites apply in turn).
   */
  cdpPolicy?: CommandPolicy;
  /**
   * Runs at every launch once Chromium answers and before it counts as ready, with the daemon's own
   * session of that run (kept for the run's life). A hook that throws fails the launch.
   */
  onLaunch?: (cdp: CdpClient, pid: number) => Promise<void>;
  /** Every state change, with the snapshot after it. */
  onState?: (state: BrowserState, snapshot: BrowserSnapshot) => void;
  /** CDP clients of the endpoint connecting and leaving. */
  cdpClients?: CdpClientEvents;
  /** Fields added to GET /browsers/{id}. */
  snapshot?: () => Record<string, unknown>;
  /**
   * URL fields added to GET /browsers/{id} beside cdp_ws_url (the WebDriver module: webdriver_ws_url):
   * `wsBase` is ws://<host>/browsers/{id}, `cdpToken` the token cdp_ws_url carries.
   */
  links?: (link: { wsBase: string; cdpToken: string }) => Record<string, string>;
  /** Fields of PATCH /browsers/{id} (kept by the browser module's route): they apply before the browser's own (viewport), in the order of use(). */
  update?: BrowserUpdatePart;
  /** A field of POST /browsers/{id}/configure: checked with every other part, applied at its one restart. */
  configure?: ConfigurePart;
}

const SLOTS = ['launchExtras', 'stopWork', 'proxyPort'] as const;
type Slot = (typeof SLOTS)[number];

/** A second module claimed a slot: a wiring bug, thrown at start. */
export class SlotTakenError extends Error {
  constructor(
    readonly slot: Slot,
    readonly holder: string,
    readonly claimant: string,
  ) {
    super(`the browser's ${slot} is ${holder}'s: ${claimant} cannot claim it too`);
    this.name = 'SlotTakenError';
  }
}

/** Every module's plugs, read by the browser module. */
export class BrowserPlugs {
  private readonly owners = new Map<Slot, string>();
  private readonly slots: Pick<BrowserPlug, Slot> = {};
  readonly onLaunch: NonNullable<BrowserPlug['onLaunch']>[] = [];
  readonly onState: NonNullable<BrowserPlug['onState']>[] = [];
  readonly cdpClients: CdpClientEvents[] = [];
  readonly snapshot: NonNullable<BrowserPlug['snapshot']>[] = [];
  readonly links: NonNullable<BrowserPlug['links']>[] = [];
  readonly configure: ConfigurePart[] = [];
  private readonly cdpPolicies: CommandPolicy[] = [];

  /** Adds a module's plugs; a slot already held throws SlotTakenError and nothing of this plug is added. */
  use(plug: BrowserPlug): void {
    for (const slot of SLOTS) {
      const holder = this.owners.get(slot);
      if (plug[slot] !== undefined && holder !== undefined) throw new SlotTakenError(slot, holder, plug.name);
    }
    for (const slot of SLOTS) {
      if (plug[slot] === undefined) continue;
      this.owners.set(slot, plug.name);
      Object.assign(this.slots, { [slot]: plug[slot] });
    }
    if (plug.onLaunch) this.onLaunch.push(plug.onLaunch);
    if (plug.onState) this.onState.push(plug.onState);
    if (plug.cdpClients) this.cdpClients.push(plug.cdpClients);
    if (plug.snapshot) this.snapshot.push(plug.snapshot);
    if (plug.links) this.links.push(plug.links);
    if (plug.configure) this.configure.push(plug.configure);
    if (plug.cdpPolicy) this.cdpPolicies.push(plug.cdpPolicy);
  }

  /** Who holds a slot, or null. */
  owner(slot: Slot): string | null {
    return this.owners.get(slot) ?? null;
  }

  launchExtras(): LaunchExtras {
    return this.slots.launchExtras?.() ?? { extensionPaths: [], allowBackgroundNetworking: false };
  }

  stopWork(): StopWork | null {
    return this.slots.stopWork?.() ?? null;
  }

  proxyPort(): number | null {
    return this.slots.proxyPort?.() ?? null;
  }

  cdpPolicy(): CommandPolicy | undefined {
    return this.cdpPolicies.length === 0 ? undefined : composePolicies(this.cdpPolicies);
  }

  /** The CDP client events fanned out to every module's listener. */
  readonly cdpClientEvents: CdpClientEvents = {
    connected: (c) => {
      for (const l of this.cdpClients) l.connected(c);
    },
    closed: (c) => {
      for (const l of this.cdpClients) l.closed(c);
    },
  };
}
