import { Router } from "express";
import { validateAuthHookRequest } from "@vw/contracts";
import { badRequest } from "@vw/service-kit";
import type { AuthHookService } from "./auth-hook.service.js";
import { methodNotAllowed } from "./http-support.js";

/**
 * `POST /auth-hook`: validates the body (400 listing every invalid member; 404 for an unknown
 * world), then calls the world's `auth` endpoints one after another and answers 200
 * `{results: [{endpointId, status, durationMs, error?}]}`, whatever the receivers did.
 */
export function authHookRouter(hook: AuthHookService): Router {
  const router = Router({ caseSensitive: true });
  router.post("/auth-hook", async (req, res) => {
    if (req.body === undefined) {
      throw badRequest("invalid-request", "The request needs a JSON body: {world, roomUrl, uuid, accessTokens?}.", [{ pointer: "", detail: "is required" }]);
    }
    const parsed = validateAuthHookRequest(req.body);
    if (!parsed.ok) {
      throw badRequest("invalid-request", "The request is not valid and no endpoint was called; see `errors` for each invalid member.", parsed.errors);
    }
    res.status(200).json(await hook.run(parsed.value));
  });
  router.all("/auth-hook", methodNotAllowed(["POST"]));
  return router;
}
