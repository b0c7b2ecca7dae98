// POST /browsers/{id}/tokens: a session token narrower than the caller's credential (a view-only
// live link, a CDP-only URL for a tool, a token that ends sooner). The key ring's derive() holds
// the rule: never a scope the caller lacks, never past the caller's own expiry.
import { z } from 'zod';
import { ForbiddenError } from '../../core/errors.js';
import { lazy } from '../../core/lazy.js';
import { ALL_SCOPES, type DerivedToken, type Identity, type Scope } from '../auth.js';
import type { Route } from '../router.js';
import { routesIn } from '../route.js';

const route = routesIn('daemon/http/jwt/routes.ts');

/** The longest life a token may ask for; BROWSERD_JWT_TTL_SEC and the caller's own expiry bound it further. */
export const TOKEN_TTL_MAX_SEC = 86_400;

const tokenBody = lazy(() => z.strictObject({
  scopes: z
    .array(z.enum(ALL_SCOPES as [Scope, ...Scope[]]))
    .max(ALL_SCOPES.length)
    .optional()
    .meta({ description: "The token's scopes: each one the caller holds (else 403 naming it). Default: every scope of the caller" }),
  ttl_sec: z
    .number()
    .int('must be a whole number of seconds')
    .min(1)
    .max(TOKEN_TTL_MAX_SEC)
    .optional()
    .meta({ description: "The token's life in seconds: at most BROWSERD_JWT_TTL_SEC (the default), and never past the caller's own expiry" }),
}));

const tokenSchema = lazy(() => z.object({
  jwt: z.string().describe('the token: send it as `Authorization: Bearer` or `?jwt=`'),
  scopes: z.array(z.string()).describe('what it grants'),
  project: z.string().nullable(),
  expires_at: z.string().describe('ISO time of its exp: the earliest of now + ttl_sec, now + BROWSERD_JWT_TTL_SEC and the caller\'s own expiry'),
}));

export function tokenRoutes(deps: { derive(identity: Identity, want: { scopes?: readonly Scope[]; ttlSec?: number }): Promise<DerivedToken> }): Route[] {
  return [
    route({
      method: 'POST',
      path: '/browsers/{id}/tokens',
      scope: 'any',
      doc: () => ({
        summary: 'Mint a session token narrower than your own credential (a view-only live link, a CDP-only URL)',
        description:
          'Signed with the daemon\'s own key, for this session. Its scopes are those asked for (each one the caller must hold: else 403 naming it), or all of the caller\'s; ' +
          "its project is the caller's; it expires after ttl_sec (default and at most BROWSERD_JWT_TTL_SEC), and never later than the token the request came with (a key has no expiry). " +
          'A token minted from a token is bound the same way: no chain of tokens reaches past its first credential. docs/tokens.md.',
        body: tokenBody(),
        responses: { 201: { description: 'the token', schema: tokenSchema() } },
        errors: [400, 403],
      }),
      handler: async (ctx) => {
        const identity = ctx.identity;
        if (identity === null) throw new Error('tokens without identity');
        const body = ctx.body;
        const lacking = body.scopes?.find((s) => !identity.scopes.has(s));
        if (lacking !== undefined) throw new ForbiddenError(lacking);
        const t = await deps.derive(identity, { scopes: body.scopes, ttlSec: body.ttl_sec });
        return { status: 201, body: { jwt: t.token, scopes: t.scopes, project: t.project, expires_at: new Date(t.expiresAt * 1000).toISOString() } };
      },
    }),
  ];
}
