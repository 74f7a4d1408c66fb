import { Router, type Request } from "express";
import { AppError } from "@vw/service-kit";
import { DELIVERY_STATUSES, validateTestDeliveryRequest, type DeliveryStatus } from "@vw/contracts";
import type { DeliveriesService, DeliveryPageRequest } from "./deliveries.service.js";
import type { EndpointTestService } from "./endpoint-test.service.js";
import { methodNotAllowed, pageRequest, validBody } from "./http-support.js";

const BASE = "/worlds/:org/:world/endpoints/:id";

/** `limit`, `cursor` and the optional `status` filter of the delivery list; 400 names a bad one. */
function deliveryPageRequest(req: Request): DeliveryPageRequest {
  const { status } = req.query;
  if (status !== undefined && (typeof status !== "string" || !(DELIVERY_STATUSES as readonly string[]).includes(status))) {
    throw new AppError(400, "invalid-parameter", `The query parameter status must be one of ${DELIVERY_STATUSES.join(", ")}.`, { parameter: "status" });
  }
  return { ...pageRequest(req), status: status as DeliveryStatus | undefined };
}

/** The Test action, the delivery history of an endpoint and Replay. */
export function deliveriesRouter(deliveries: DeliveriesService, tests: EndpointTestService): Router {
  const router = Router({ caseSensitive: true });
  const location = (org: string, world: string, id: string, deliveryId: string) =>
    `/admin/v1/worlds/${org}/${world}/endpoints/${id}/deliveries/${deliveryId}`;

  // The body is optional: no body is a ping.
  router
    .route(`${BASE}/test`)
    .post(async (req, res) => {
      const request = validBody(validateTestDeliveryRequest, req.body ?? {});
      res.json(await tests.send(req.params.org, req.params.world, req.params.id, request));
    })
    .all(methodNotAllowed(["POST"]));

  router
    .route(`${BASE}/deliveries`)
    .get(async (req, res) => {
      res.json(await deliveries.list(req.params.org, req.params.world, req.params.id, deliveryPageRequest(req)));
    })
    .all(methodNotAllowed(["GET"]));

  router
    .route(`${BASE}/deliveries/:deliveryId`)
    .get(async (req, res) => {
      const { org, world, id, deliveryId } = req.params;
      res.json(await deliveries.get(org, world, id, deliveryId));
    })
    .all(methodNotAllowed(["GET"]));

  // Takes no body; one sent anyway is ignored.
  router
    .route(`${BASE}/deliveries/:deliveryId/replay`)
    .post(async (req, res) => {
      const { org, world, id, deliveryId } = req.params;
      const delivery = await deliveries.replay(org, world, id, deliveryId);
      res.status(202).location(location(org, world, id, delivery.deliveryId)).json(delivery);
    })
    .all(methodNotAllowed(["POST"]));

  return router;
}
