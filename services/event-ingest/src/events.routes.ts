import { Router } from "express";
import { badRequest } from "@vw/service-kit";
import { parseIntakeRequest } from "./events.schema.js";
import { methodNotAllowed } from "./http-support.js";
import type { IngestService } from "./ingest.service.js";

/**
 * `POST /events`: validates the whole request first (400 listing every invalid member, nothing
 * stored), then stores and fans out; answers 202 `{accepted, duplicates, deliveries}`.
 */
export function eventsRouter(ingest: IngestService, maxEventsPerRequest: number): Router {
  const router = Router({ caseSensitive: true });
  router.post("/events", async (req, res) => {
    if (req.body === undefined) {
      throw badRequest("invalid-request", "The request needs a JSON body: one event, or {events: [...]}.", [{ pointer: "", detail: "is required" }]);
    }
    const parsed = parseIntakeRequest(req.body, maxEventsPerRequest);
    if (!parsed.ok) {
      throw badRequest("invalid-request", "The request is not valid and nothing was accepted; see `errors` for each invalid member.", parsed.errors);
    }
    res.status(202).json(await ingest.ingest(parsed.value));
  });
  router.all("/events", methodNotAllowed(["POST"]));
  return router;
}
