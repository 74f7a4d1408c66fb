import { Router } from "express";
import { validateCreateOrganizationRequest, validateCreateWorldRequest } from "@vw/contracts";
import { methodNotAllowed, pageRequest, validBody } from "./http-support.js";
import type { OrganizationsService } from "./organizations.service.js";
import type { WorldsService } from "./worlds.service.js";

/** `/organizations`, `/organizations/{org}` and `/organizations/{org}/worlds`. */
export function organizationsRouter(organizations: OrganizationsService, worlds: WorldsService): Router {
  const router = Router({ caseSensitive: true });

  router
    .route("/organizations")
    .get(async (req, res) => {
      res.json(await organizations.list(pageRequest(req)));
    })
    .post(async (req, res) => {
      const organization = await organizations.create(validBody(validateCreateOrganizationRequest, req.body));
      res.status(201).location(`/admin/v1/organizations/${organization.slug}`).json(organization);
    })
    .all(methodNotAllowed(["GET", "POST"]));

  router
    .route("/organizations/:org")
    .get(async (req, res) => {
      res.json(await organizations.get(req.params.org));
    })
    .all(methodNotAllowed(["GET"]));

  router
    .route("/organizations/:org/worlds")
    .get(async (req, res) => {
      res.json(await worlds.list(req.params.org, pageRequest(req)));
    })
    .post(async (req, res) => {
      const world = await worlds.create(req.params.org, validBody(validateCreateWorldRequest, req.body));
      res.status(201).location(`/admin/v1/worlds/${world.organization}/${world.slug}`).json(world);
    })
    .all(methodNotAllowed(["GET", "POST"]));

  return router;
}
