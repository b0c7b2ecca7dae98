// GET and PUT /browsers/{id}/network/egress-policy (scopes network:read, network:write).
import { z } from 'zod';
import { lazy } from '../core/lazy.js';
import { routesIn } from '../http/route.js';
import type { Route } from '../http/router.js';
import type { EgressState } from './state.js';
import { policySchema, withDefaults } from './policy.js';

const route = routesIn('daemon/egress/routes.ts');

const ENFORCEMENT_TEXT =
  'Applied at once: the forwarding proxy closes every connection of the browser (Chromium reconnects) and judges every new one by the new policy; Chromium reads ' +
  'its managed policy (ProxySettings pinned to the forwarding proxy, WebRtcIPHandling disable_non_proxied_udp, DnsOverHttpsMode off) from the daemon\'s ' +
  'file in the policy folder without a restart (within its reload delay, seconds), and at every launch. `processes` says whether the agent\'s processes ' +
  'are held to it too (nftables rules on the agent user\'s uid): "enforced", "not enforced" (with `processes_reason`: no nft, no CAP_NET_ADMIN, or ' +
  'BROWSERD_EGRESS_NFTABLES=false) or "not filtered". Kept in the state dir: it survives daemon and Chromium restarts. See docs/egress.md.';

export const answerSchema = lazy(() =>
  z.object({
    filtered: z.boolean(),
    allowed_hosts: z.array(z.string()),
    allow_private: z.array(z.string()),
    blocked_hosts: z.array(z.string()),
    browser: z.enum(['enforced', 'not filtered']).describe('whether the browser\'s connections are judged (always, while filtered: every byte of Chromium goes through the forwarding proxy)'),
    processes: z.enum(['enforced', 'not enforced', 'not filtered']).describe('whether the agent\'s processes are held to the policy (nftables on the agent user\'s uid)'),
    processes_reason: z.string().optional().describe('why the processes are not held to it, when `processes` is "not enforced"'),
    chromium_policy_file: z.string().describe("the daemon's managed-policy file that pins Chromium to the forwarding proxy while filtered (absent while not)"),
  }),
);

export function egressRoutes(state: EgressState): Route[] {
  return [
    route({
      method: 'GET',
      path: '/browsers/{id}/network/egress-policy',
      scope: 'network:read',
      doc: () => ({ summary: 'The egress policy: where the browser and the agent\'s processes may connect', description: ENFORCEMENT_TEXT, responses: { 200: { description: 'the policy and where it is enforced', schema: answerSchema() } } }),
      handler: async () => ({ status: 200, body: state.answer() }),
    }),
    route({
      method: 'PUT',
      path: '/browsers/{id}/network/egress-policy',
      scope: 'network:write',
      doc: () => ({
        summary: 'Replace the egress policy',
        description: `The whole policy (absent lists take their defaults); each bad entry is one detail of a 400 (\`allowed_hosts.2: …\`), and nothing changes. ${ENFORCEMENT_TEXT}`,
        body: policySchema(),
        responses: { 200: { description: 'the policy as stored and where it is enforced', schema: answerSchema() } },
        errors: [400],
      }),
      handler: async (ctx) => {
        const input = ctx.body;
        await state.set(withDefaults(input), ctx.log);
        return { status: 200, body: state.answer() };
      },
    }),
  ];
}
