import express from "express";
import { SUPPORTED_WAM_VERSIONS, wamSchemaDocument } from "@vw/contracts";
import { AppError } from "@vw/service-kit";

/** `GET /schemas/wam/<version>.json`: the WAM JSON Schema (draft 2020-12) of each known version. */
export function schemasRouter(publicBaseUrl: string): express.Router {
  const router = express.Router();
  router.get("/schemas/wam/:file", (req, res) => {
    const m = /^(.+)\.json$/.exec(req.params.file ?? "");
    const doc = m?.[1] ? wamSchemaDocument(m[1], publicBaseUrl) : undefined;
    if (!doc) {
      throw new AppError(404, "unknown-schema-version", `No WAM schema '${req.params.file}'; known versions: ${SUPPORTED_WAM_VERSIONS.join(", ")}.`);
    }
    res.setHeader("Cache-Control", "public, max-age=3600");
    res.type("application/schema+json").send(JSON.stringify(doc, null, 2));
  });
  router.get("/schemas/wam", (_req, res) => {
    res.json({ versions: SUPPORTED_WAM_VERSIONS.map((v) => ({ version: v, url: `${publicBaseUrl}/schemas/wam/${v}.json` })) });
  });
  return router;
}
