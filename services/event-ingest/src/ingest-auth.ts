import type { RequestHandler } from "express";
import { bearerAuth } from "@vw/service-kit";

/** Requires `Authorization: Bearer <INGEST_TOKEN>` (constant-time; 401 with `WWW-Authenticate`). */
export function ingestAuth(ingestToken: string): RequestHandler {
  return bearerAuth({ token: ingestToken, realm: "event-ingest", variable: "INGEST_TOKEN", label: "ingest token" });
}
