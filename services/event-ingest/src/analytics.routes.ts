import { Router } from "express";
import { badRequest } from "@vw/service-kit";
import { parseAnalyticsRequest } from "./analytics.schema.js";
import type { AnalyticsIntake } from "./analytics.service.js";
import { methodNotAllowed } from "./http-support.js";

/**
 * `POST /analytics`: validates every inner event first (400 with a pointer per invalid member,
 * nothing buffered), then applies the world's privacy settings and buffers; answers 202
 * `{accepted, dropped, endpoints}` (a world that disabled analytics gets 202 with everything dropped).
 */
export function analyticsRouter(intake: AnalyticsIntake, maxEventsPerRequest: number): Router {
  const router = Router({ caseSensitive: true });
  router.post("/analytics", async (req, res) => {
    if (req.body === undefined) {
      throw badRequest("invalid-request", "The request needs a JSON body: {world, events: [...]}.", [{ pointer: "", detail: "is required" }]);
    }
    const parsed = parseAnalyticsRequest(req.body, maxEventsPerRequest);
    if (!parsed.ok) {
      throw badRequest("invalid-request", "The request is not valid and nothing was accepted; see `errors` for each invalid member.", parsed.errors);
    }
    res.status(202).json(await intake.ingest(parsed.value));
  });
  router.all("/analytics", methodNotAllowed(["POST"]));
  return router;
}
