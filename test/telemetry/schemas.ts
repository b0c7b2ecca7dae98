// The SDK's declared shapes (@onkernel/sdk src/resources/browsers/telemetry.ts) of the event types
// browserd emits, as zod schemas, checked at run time against every event a test receives; and the
// shapes of browserd's own types (docs/telemetry.md). Strict objects: a field the SDK does not
// declare fails the check.
import { z } from 'zod';

const source = z.strictObject({
  kind: z.enum(['cdp', 'kernel_api', 'extension', 'local_process']),
  event: z.string().optional(),
  metadata: z.record(z.string(), z.string()).optional(),
});
const targetType = z.enum(['page', 'background_page', 'service_worker', 'shared_worker', 'other']);
const context = {
  frame_id: z.string().optional(),
  loader_id: z.string().optional(),
  nav_seq: z.number().optional(),
  session_id: z.string().optional(),
  target_id: z.string().optional(),
  target_type: targetType.optional(),
  url: z.string().optional(),
};
const callStack = z.strictObject({
  callFrames: z.array(z.strictObject({ columnNumber: z.number(), functionName: z.string(), lineNumber: z.number(), scriptId: z.string(), url: z.string() })),
  description: z.string().optional(),
});
const headers = z.record(z.string(), z.unknown());

function event<T extends string, C extends string>(type: T, category: C, data?: z.ZodType) {
  return z.strictObject({
    ts: z.number().int().positive(),
    type: z.literal(type),
    category: z.literal(category),
    source,
    data: (data ?? z.never()).optional(),
    truncated: z.boolean().optional(),
  });
}

export const SCHEMAS: Record<string, z.ZodType> = {
  // The SDK's types.
  api_call: event('api_call', 'control', z.strictObject({ duration_ms: z.number(), operation_id: z.string(), request_id: z.string(), status: z.number() })),
  cdp_connect: event('cdp_connect', 'connection'),
  cdp_disconnect: event(
    'cdp_disconnect',
    'connection',
    z.strictObject({ duration_ms: z.number(), message_count: z.number(), reason: z.enum(['client_close', 'upstream_changed', 'upstream_error', 'context_cancelled']) }),
  ),
  console_log: event('console_log', 'console', z.strictObject({ ...context, args: z.array(z.string()).optional(), level: z.string().optional(), stack_trace: callStack.optional(), text: z.string().optional() })),
  console_error: event(
    'console_error',
    'console',
    z.strictObject({
      ...context,
      text: z.string(),
      args: z.array(z.string()).optional(),
      column: z.number().optional(),
      level: z.string().optional(),
      line: z.number().optional(),
      source_url: z.string().optional(),
      stack_trace: callStack.optional(),
    }),
  ),
  network_request: event(
    'network_request',
    'network',
    z.strictObject({
      ...context,
      document_url: z.string().optional(),
      headers: headers.optional(),
      initiator_type: z.string().optional(),
      is_redirect: z.boolean().optional(),
      method: z.string().optional(),
      post_data: z.string().optional(),
      redirect_url: z.string().optional(),
      request_id: z.string().optional(),
      resource_type: z.string().optional(),
    }),
  ),
  network_response: event(
    'network_response',
    'network',
    z.strictObject({
      ...context,
      body: z.string().optional(),
      headers: headers.optional(),
      method: z.string().optional(),
      mime_type: z.string().optional(),
      request_id: z.string().optional(),
      resource_type: z.string().optional(),
      status: z.number().optional(),
      status_text: z.string().optional(),
    }),
  ),
  network_loading_failed: event(
    'network_loading_failed',
    'network',
    z.strictObject({ ...context, canceled: z.boolean().optional(), error_text: z.string().optional(), request_id: z.string().optional(), resource_type: z.string().optional() }),
  ),
  page_navigation: event(
    'page_navigation',
    'page',
    z.strictObject({
      frame_id: z.string().optional(),
      loader_id: z.string().optional(),
      parent_frame_id: z.string().optional(),
      session_id: z.string().optional(),
      target_id: z.string().optional(),
      target_type: targetType.optional(),
      url: z.string().optional(),
    }),
  ),
  page_dom_content_loaded: event('page_dom_content_loaded', 'page', z.strictObject({ ...context, cdp_timestamp: z.number().optional() })),
  page_load: event('page_load', 'page', z.strictObject({ ...context, cdp_timestamp: z.number().optional() })),
  page_tab_opened: event(
    'page_tab_opened',
    'page',
    z.strictObject({ opener_id: z.string().optional(), target_id: z.string().optional(), target_type: targetType.optional(), title: z.string().optional(), url: z.string().optional() }),
  ),
  service_crashed: event('service_crashed', 'system', z.strictObject({ phase: z.enum(['startup', 'running', 'gave_up']), service_name: z.string(), pid: z.number().optional() })),
  monitor_disconnected: event('monitor_disconnected', 'monitor', z.strictObject({ reason: z.literal('chrome_restarted').optional() })),
  monitor_reconnected: event('monitor_reconnected', 'monitor', z.strictObject({ reconnect_duration_ms: z.number().optional() })),
  monitor_init_failed: event('monitor_init_failed', 'monitor', z.strictObject({ step: z.string().optional() })),
  // browserd's own types (docs/telemetry.md).
  page_tab_closed: event('page_tab_closed', 'page', z.strictObject({ target_id: z.string(), target_type: targetType, session_id: z.string() })),
  page_crashed: event(
    'page_crashed',
    'system',
    z.strictObject({ target_id: z.string(), status: z.string(), error_code: z.number(), target_type: targetType.optional(), url: z.string().optional() }),
  ),
  chromium_started: event('chromium_started', 'system', z.strictObject({ pid: z.number().nullable(), version: z.string().nullable(), restarts: z.number() })),
  chromium_exited: event('chromium_exited', 'system', z.strictObject({ pid: z.number().nullable(), code: z.number().nullable(), signal: z.string().nullable(), reason: z.string() })),
  process_exited: event('process_exited', 'system', z.strictObject({ process_id: z.string(), pid: z.number(), exit_code: z.number().nullable(), signal: z.string().nullable() })),
  extension_installed: event(
    'extension_installed',
    'system',
    z.strictObject({ name: z.string(), id: z.string(), version: z.string(), activation: z.string(), deferred: z.boolean() }),
  ),
  proxy_switched: event('proxy_switched', 'system', z.strictObject({ proxy_id: z.string().nullable(), previous: z.string().nullable() })),
  events_dropped: event('events_dropped', 'monitor', z.strictObject({ count: z.number().int().positive(), from_seq: z.number(), to_seq: z.number() })),
};

export const envelope = z.strictObject({ seq: z.number().int().positive(), event: z.looseObject({ type: z.string() }) });

/** Checks an envelope against its type's schema; throws naming the type and the problem. */
export function checkShape(e: unknown): void {
  const env = envelope.parse(e);
  const schema = SCHEMAS[env.event.type];
  if (schema === undefined) return; // a custom event of a test
  const r = schema.safeParse(env.event);
  if (!r.success) throw new Error(`${env.event.type} does not have the SDK's shape: ${r.error.message}\n${JSON.stringify(env.event)}`);
}
