import { Router } from "express";
import { AppError, badRequest, type FieldError } from "@vw/service-kit";
import { parseAnalyticsRequest } from "./analytics.schema.js";
import type { AnalyticsIntake } from "./analytics.service.js";
import { methodNotAllowed } from "./http-support.js";

/**
 * 413 when an inner event is larger than `maxBytes` (its JSON, as it would be buffered), naming
 * each such event by its index (a pointer) and its `id`; nothing of the request is accepted.
 */
function checkEventSizes(body: unknown, maxBytes: number): void {
  const events = typeof body === "object" && body !== null ? (body as { events?: unknown }).events : undefined;
  if (!Array.isArray(events)) return;
  const errors: FieldError[] = [];
  events.forEach((event: unknown, index) => {
    const bytes = Buffer.byteLength(JSON.stringify(event) ?? "", "utf8");
    if (bytes <= maxBytes) return;
    const id = (event as { id?: unknown } | null)?.id;
    const named = typeof id === "string" ? ` (id "${id.length > 64 ? `${id.slice(0, 64)}…` : id}")` : "";
    errors.push({ pointer: `/events/${index}`, detail: `event ${index}${named} is ${bytes} bytes; the limit is ${maxBytes} (ANALYTICS_EVENT_MAX_BYTES)` });
  });
  if (errors.length === 0) return;
  const first = errors[0]!.detail;
  throw new AppError(413, "payload-too-large", `An analytics event is too large: ${first}${errors.length > 1 ? `, and ${errors.length - 1} more` : ""}. Nothing was accepted.`, {
    limit: maxBytes,
    errors,
  });
}

/**
 * `POST /analytics`: refuses an inner event over `eventMaxBytes` (413 naming it), validates every
 * inner event (400 with a pointer per invalid member, nothing buffered), then applies the world's
 * privacy settings and buffers; answers 202 `{accepted, dropped, endpoints}` (a world that
 * disabled analytics gets 202 with everything dropped).
 */
export function analyticsRouter(intake: AnalyticsIntake, maxEventsPerRequest: number, eventMaxBytes: number): Router {
  const router = Router({ caseSensitive: true });
  router.post("/analytics", async (req, res) => {
    if (req.body === undefined) {
      throw badRequest("invalid-request", "The request needs a JSON body: {world, events: [...]}.", [{ pointer: "", detail: "is required" }]);
    }
    checkEventSizes(req.body, eventMaxBytes);
    const parsed = parseAnalyticsRequest(req.body, maxEventsPerRequest);
    if (!parsed.ok) {
      throw badRequest("invalid-request", "The request is not valid and nothing was accepted; see `errors` for each invalid member.", parsed.errors);
    }
    res.status(202).json(await intake.ingest(parsed.value));
  });
  router.all("/analytics", methodNotAllowed(["POST"]));
  return router;
}
