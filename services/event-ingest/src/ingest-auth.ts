import type { RequestHandler } from "express";
import { bearerAuth, type AuthThrottle } from "@vw/service-kit";

/**
 * Requires `Authorization: Bearer <INGEST_TOKEN>` (constant-time; 401 with `WWW-Authenticate`); with
 * a `throttle`, a client that sent too many wrong tokens gets 429 whatever it sends.
 */
export function ingestAuth(ingestToken: string, throttle?: AuthThrottle): RequestHandler {
  return bearerAuth({ token: ingestToken, realm: "event-ingest", variable: "INGEST_TOKEN", label: "ingest token", ...(throttle ? { throttle } : {}) });
}
