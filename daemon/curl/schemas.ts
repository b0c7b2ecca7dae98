// The shapes of /curl: the SDK's BrowserCurlParams → BrowserCurlResponse.
import { z } from 'zod';
import { lazy } from '../core/lazy.js';

export const CURL_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;
/** The methods of /curl/raw (those the SDK's browsers.fetch sends). */
export const RAW_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;

export function curlParamsSchema(maxTimeoutMs: number) {
  return z.strictObject({
    url: z.string().min(1).max(16_384).describe('the target: http or https'),
    method: z.enum(CURL_METHODS).default('GET'),
    headers: z
      .record(z.string().min(1).max(256), z.string().max(16_384))
      .optional()
      .describe("replace Chromium's headers of the same name (case-insensitive); the profile's cookies are sent unless a Cookie header is given"),
    body: z.string().optional().describe('the request body, as UTF-8 text (POST, PUT, PATCH, DELETE, OPTIONS)'),
    response_encoding: z.enum(['utf8', 'base64']).default('utf8').describe('base64 for binary answers'),
    timeout_ms: z.number().int().min(1).max(maxTimeoutMs).optional().describe(`the whole request's deadline, answer included (default BROWSERD_CURL_TIMEOUT_MS; at most BROWSERD_CURL_MAX_TIMEOUT_MS)`),
  });
}
export type CurlParams = z.infer<ReturnType<typeof curlParamsSchema>>;

export const curlResponseSchema = lazy(() => z.object({
  status: z.number().int().describe("the target's HTTP status (after redirects, which are followed)"),
  headers: z.record(z.string(), z.array(z.string())).describe('the answer\'s headers as sent, lower-case names, every value of a repeated header'),
  body: z.string().describe('UTF-8 text, or base64 with response_encoding base64'),
  duration_ms: z.number().describe('from the start of the request to the last byte of the answer'),
}));
