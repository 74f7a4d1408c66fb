import { Router } from "express";
import { validateRecoverRequest } from "@vw/contracts";
import { methodNotAllowed, validBody } from "./http-support.js";
import type { RecoveriesService } from "./recoveries.service.js";

const BASE = "/worlds/:org/:world/endpoints/:id";

/** `POST .../endpoints/{id}/recover` and `GET .../endpoints/{id}/recoveries/{recoveryId}`. */
export function recoveriesRouter(recoveries: RecoveriesService): Router {
  const router = Router({ caseSensitive: true });
  const location = (org: string, world: string, id: string, recoveryId: string) => `/admin/v1/worlds/${org}/${world}/endpoints/${id}/recoveries/${recoveryId}`;

  router
    .route(`${BASE}/recover`)
    .post(async (req, res) => {
      const { org, world, id } = req.params;
      const request = validBody(validateRecoverRequest, req.body);
      const answer = await recoveries.recover(org, world, id, request);
      if ("count" in answer) {
        res.json(answer);
        return;
      }
      res.status(202).location(location(org, world, id, answer.id)).json(answer);
    })
    .all(methodNotAllowed(["POST"]));

  router
    .route(`${BASE}/recoveries/:recoveryId`)
    .get(async (req, res) => {
      const { org, world, id, recoveryId } = req.params;
      res.json(await recoveries.get(org, world, id, recoveryId));
    })
    .all(methodNotAllowed(["GET"]));

  return router;
}
