import { Router } from "express";
import { validateCreateApiKeyRequest, validateUpdateWorldRequest } from "@vw/contracts";
import type { ApiKeysService } from "./api-keys.service.js";
import { authorizeWorldPatch, sessionOf } from "./dashboard-auth.js";
import { methodNotAllowed, pageRequest, validBody } from "./http-support.js";
import type { WorldsService } from "./worlds.service.js";

/** `/worlds/{org}/{world}` (settings) and its `/api-keys`. */
export function worldsRouter(worlds: WorldsService, apiKeys: ApiKeysService): Router {
  const router = Router({ caseSensitive: true });

  router
    .route("/worlds/:org/:world")
    .get(async (req, res) => {
      res.json(await worlds.get(req.params.org, req.params.world));
    })
    .patch(async (req, res) => {
      authorizeWorldPatch(sessionOf(res), req.body);
      res.json(await worlds.update(req.params.org, req.params.world, validBody(validateUpdateWorldRequest, req.body)));
    })
    .all(methodNotAllowed(["GET", "PATCH"]));

  router
    .route("/worlds/:org/:world/api-keys")
    .get(async (req, res) => {
      res.json(await apiKeys.list(req.params.org, req.params.world, pageRequest(req)));
    })
    .post(async (req, res) => {
      // The body is optional: `{}` and no body at all both create an unnamed key.
      const key = await apiKeys.create(req.params.org, req.params.world, validBody(validateCreateApiKeyRequest, req.body ?? {}));
      res
        .status(201)
        .set("Cache-Control", "no-store")
        .location(`/admin/v1/worlds/${req.params.org}/${req.params.world}/api-keys/${key.id}`)
        .json(key);
    })
    .all(methodNotAllowed(["GET", "POST"]));

  router
    .route("/worlds/:org/:world/api-keys/:id")
    .get(async (req, res) => {
      res.json(await apiKeys.get(req.params.org, req.params.world, req.params.id));
    })
    .delete(async (req, res) => {
      await apiKeys.revoke(req.params.org, req.params.world, req.params.id);
      res.status(204).end();
    })
    .all(methodNotAllowed(["GET", "DELETE"]));

  return router;
}
