import { Router, type Request } from "express";
import { AppError } from "@vw/service-kit";
import { DELIVERY_STATUSES, validateTestDeliveryRequest, type DeliveryStatus } from "@vw/contracts";
import type { DeliveriesService, DeliveryPageRequest } from "./deliveries.service.js";
import type { EndpointTestService } from "./endpoint-test.service.js";
import { idPageRequest, methodNotAllowed, validBody } from "./http-support.js";

const BASE = "/worlds/:org/:world/endpoints/:id";

/** RFC 3339 date-time with an offset (`Z` or `±hh:mm`), as `since` and `until` take it. */
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/i;
/** Longest `type` or `eventId` filter accepted (longer ones cannot match anything stored). */
const MAX_FILTER_LENGTH = 200;

function badParameter(parameter: string, detail: string): AppError {
  return new AppError(400, "invalid-parameter", `The query parameter ${parameter} ${detail}.`, { parameter });
}

/** One optional query parameter given at most once, as a string. */
function single(req: Request, parameter: string): string | undefined {
  const value = req.query[parameter];
  if (value === undefined) return undefined;
  if (typeof value !== "string") throw badParameter(parameter, "must be given once, as a single value");
  return value;
}

function dateTime(req: Request, parameter: string): Date | undefined {
  const value = single(req, parameter);
  if (value === undefined) return undefined;
  const date = new Date(value);
  if (!RFC3339.test(value) || Number.isNaN(date.getTime())) throw badParameter(parameter, "must be an RFC 3339 date-time with an offset, such as 2026-11-23T12:00:00Z");
  return date;
}

function text(req: Request, parameter: string): string | undefined {
  const value = single(req, parameter);
  if (value !== undefined && (value.length === 0 || value.length > MAX_FILTER_LENGTH)) throw badParameter(parameter, `must be 1 to ${MAX_FILTER_LENGTH} characters long`);
  return value;
}

/** `limit`, `cursor` and the optional filters of the delivery list; 400 names a bad one. */
function deliveryPageRequest(req: Request): DeliveryPageRequest {
  const status = single(req, "status");
  if (status !== undefined && !(DELIVERY_STATUSES as readonly string[]).includes(status)) {
    throw badParameter("status", `must be one of ${DELIVERY_STATUSES.join(", ")}`);
  }
  const since = dateTime(req, "since");
  const until = dateTime(req, "until");
  if (since !== undefined && until !== undefined && since.getTime() >= until.getTime()) throw badParameter("until", "must be later than since");
  const type = text(req, "type");
  const eventId = text(req, "eventId");
  return {
    ...idPageRequest(req),
    filter: {
      ...(status === undefined ? {} : { status: status as DeliveryStatus }),
      ...(type === undefined ? {} : { type }),
      ...(since === undefined ? {} : { since }),
      ...(until === undefined ? {} : { until }),
      ...(eventId === undefined ? {} : { eventId }),
    },
  };
}

/** The Test action, the delivery history of an endpoint, its 24 h stats (and its world's) and Replay. */
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
    .route("/worlds/:org/:world/stats")
    .get(async (req, res) => {
      res.json(await deliveries.worldStats(req.params.org, req.params.world));
    })
    .all(methodNotAllowed(["GET"]));

  router
    .route(`${BASE}/stats`)
    .get(async (req, res) => {
      res.json(await deliveries.stats(req.params.org, req.params.world, req.params.id));
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
