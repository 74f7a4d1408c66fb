import { Router, type Response } from "express";
import {
  validateCreateEndpointRequest,
  validateImportLegacyEndpointRequest,
  validateSetEndpointFormatRequest,
  validateUpdateEndpointRequest,
} from "@vw/contracts";
import type { EndpointUrlChecker } from "./endpoint-url.js";
import { validEndpointBody } from "./endpoint-url.js";
import type { EndpointsService } from "./endpoints.service.js";
import { methodNotAllowed, pageRequest, validBody } from "./http-support.js";

const BASE = "/worlds/:org/:world/endpoints";

/** Answers carrying a secret must not be kept by any cache. */
const noStore = (res: Response) => res.set("Cache-Control", "no-store");

/** `/worlds/{org}/{world}/endpoints` and the actions on one endpoint. */
export function endpointsRouter(endpoints: EndpointsService, urls: EndpointUrlChecker): Router {
  const router = Router({ caseSensitive: true });
  const location = (org: string, world: string, id: string) => `/admin/v1/worlds/${org}/${world}/endpoints/${id}`;

  router
    .route(BASE)
    .get(async (req, res) => {
      res.json(await endpoints.list(req.params.org, req.params.world, pageRequest(req)));
    })
    .post(async (req, res) => {
      const { org, world } = req.params;
      const endpoint = await endpoints.create(org, world, await validEndpointBody(validateCreateEndpointRequest, req.body, urls));
      noStore(res).status(201).location(location(org, world, endpoint.id)).json(endpoint);
    })
    .all(methodNotAllowed(["GET", "POST"]));

  // Before `/:id`, which would otherwise take "import-legacy" for an id.
  router
    .route(`${BASE}/import-legacy`)
    .post(async (req, res) => {
      const { org, world } = req.params;
      const endpoint = await endpoints.importLegacy(org, world, await validEndpointBody(validateImportLegacyEndpointRequest, req.body, urls));
      res.status(201).location(location(org, world, endpoint.id)).json(endpoint);
    })
    .all(methodNotAllowed(["POST"]));

  router
    .route(`${BASE}/:id`)
    .get(async (req, res) => {
      res.json(await endpoints.get(req.params.org, req.params.world, req.params.id));
    })
    .patch(async (req, res) => {
      const patch = await validEndpointBody(validateUpdateEndpointRequest, req.body, urls);
      res.json(await endpoints.update(req.params.org, req.params.world, req.params.id, patch));
    })
    .delete(async (req, res) => {
      await endpoints.remove(req.params.org, req.params.world, req.params.id);
      res.status(204).end();
    })
    .all(methodNotAllowed(["GET", "PATCH", "DELETE"]));

  // Actions take no body; one sent anyway is ignored.
  router
    .route(`${BASE}/:id/disable`)
    .post(async (req, res) => {
      res.json(await endpoints.disable(req.params.org, req.params.world, req.params.id));
    })
    .all(methodNotAllowed(["POST"]));

  router
    .route(`${BASE}/:id/enable`)
    .post(async (req, res) => {
      res.json(await endpoints.enable(req.params.org, req.params.world, req.params.id));
    })
    .all(methodNotAllowed(["POST"]));

  router
    .route(`${BASE}/:id/rotate-secret`)
    .post(async (req, res) => {
      noStore(res).json(await endpoints.rotateSecret(req.params.org, req.params.world, req.params.id));
    })
    .all(methodNotAllowed(["POST"]));

  router
    .route(`${BASE}/:id/format`)
    .put(async (req, res) => {
      const { format } = validBody(validateSetEndpointFormatRequest, req.body);
      res.json(await endpoints.setFormat(req.params.org, req.params.world, req.params.id, format));
    })
    .all(methodNotAllowed(["PUT"]));

  return router;
}
