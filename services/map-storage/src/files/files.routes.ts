import { pipeline } from "node:stream/promises";
import express, { type Request, type RequestHandler, type Response, type Router } from "express";
import type { ApiKeyPrincipal } from "@vw/db";
import { AppError, assertUtf8Charset, clientAddress, setRouteTemplate, type ApiKeyAuthenticator } from "@vw/service-kit";
import { activeContentHeaders, type ActiveFileSandbox } from "./active-content.js";
import type { FilesService, WriteResult } from "./files.service.js";
import { isJsonExtension } from "./content-type.js";
import { encodeFilePath, parseFilePath, type FilePath } from "./file-path.js";
import { parsePatch } from "./json-patch.js";
import { parseEtagList, type WriteConditions } from "./preconditions.js";
import { isReservedPath } from "../uploads/upload-paths.js";

export interface FilesRoutesOptions {
  maxFileBytes: number;
  /** MAX_PATCH_OPERATIONS: most operations in one JSON Patch. */
  maxPatchOperations: number;
  publicBaseUrl: string;
  playUrl: string;
  /** ACTIVE_FILE_SANDBOX: how files a browser could run are served; `strict` by default. */
  activeFileSandbox?: ActiveFileSandbox;
}

const JSON_PATCH = "application/json-patch+json";
const ALLOWED = "GET, HEAD, PUT, PATCH, DELETE, OPTIONS";
/** Route label of the files API in the HTTP metrics. */
export const FILES_ROUTE_TEMPLATE = "/:organization/:world/*path";

/**
 * Request targets that can address a file: at least three segments, `/<organization>/<world>/<path>`,
 * matched on the raw (still encoded) target. Anything with fewer (`/`, `/metrics`, `/acme/hq`) can
 * never be a file, so it falls through to the 404 of unknown routes instead of a path-syntax 400;
 * everything with more is judged by {@link parseFilePath}, empty and dot segments included. No
 * capture group, so the router decodes nothing before those rules have run.
 */
export const FILE_ROUTE = /^\/[^/]*\/[^/]*\/.*$/;

/**
 * `/<organization>/<world>/<path>`: the map storage API. Order of checks, so that a refused request
 * never touches storage: path rules (400), then the key (401/403), then the body (413/415/400/422).
 */
export function filesRouter(files: FilesService, auth: ApiKeyAuthenticator<ApiKeyPrincipal>, options: FilesRoutesOptions): Router {
  // Bodies are counted decoded (a gzip body is inflated and counted as it inflates): a `.wam` and a
  // patch are parsed, so they are held to MAX_JSON_FILE_BYTES; other files to MAX_FILE_BYTES.
  const readFile = express.raw({ type: () => true, limit: options.maxFileBytes });
  const readJson = express.raw({ type: () => true, limit: files.maxJsonBytes });

  const body = (req: Request, res: Response, json: boolean): Promise<Buffer> =>
    new Promise((resolve, reject) => {
      (json ? readJson : readFile)(req, res, (err?: unknown) => {
        if (err) reject(err);
        else resolve(Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0));
      });
    });

  const authorize = async (req: Request, fp: FilePath): Promise<ApiKeyPrincipal> => {
    const principal = await auth.authenticate(req.headers.authorization, clientAddress(req));
    if (principal.organization !== fp.organization || principal.world !== fp.world) {
      throw new AppError(403, "wrong-world", `This API key belongs to world '${principal.organization}/${principal.world}', not '${fp.organization}/${fp.world}'.`);
    }
    return principal;
  };

  const conditions = (req: Request): WriteConditions => {
    const c: WriteConditions = {};
    const ifMatch = parseEtagList(req.headers["if-match"]);
    const ifNoneMatch = parseEtagList(req.headers["if-none-match"]);
    if (ifMatch !== undefined) c.ifMatch = ifMatch;
    if (ifNoneMatch !== undefined) c.ifNoneMatch = ifNoneMatch;
    return c;
  };

  const written = (res: Response, fp: FilePath, principal: ApiKeyPrincipal, result: WriteResult, status: number) => {
    const url = `${options.publicBaseUrl}/${fp.organization}/${fp.world}/${encodeFilePath(fp.path)}`;
    res.setHeader("ETag", result.etag);
    if (status === 201) res.setHeader("Location", url);
    const out: Record<string, string> = { path: fp.path, url, etag: result.etag };
    if (fp.extension === "wam") out.roomUrl = roomUrl(options.playUrl, fp, principal.customDomain);
    res.status(status).json(out);
  };

  const handler: RequestHandler = async (req, res) => {
    const fp = parseFilePath(req.originalUrl);
    // The plain spellings are the tools' routes; an encoded one (`%70ing`) lands here and is refused the same.
    if (isReservedPath(fp.path)) {
      const detail = `'${fp.path}' at a world's root is reserved for map authors' tools; it cannot be a file.`;
      throw new AppError(400, "invalid-path", detail, { errors: [{ pointer: "", detail }] });
    }
    // One label for every file of every world (a refused path stays `unmatched`).
    setRouteTemplate(res, FILES_ROUTE_TEMPLATE);
    switch (req.method) {
      case "GET":
      case "HEAD": {
        const result = await files.read(fp, parseEtagList(req.headers["if-none-match"]));
        res.setHeader("Cache-Control", "no-cache");
        if (result.status === 304) {
          res.setHeader("ETag", result.etag);
          res.status(304).end();
          return;
        }
        res.setHeader("ETag", result.meta.etag);
        res.setHeader("Content-Type", result.meta.contentType);
        res.setHeader("X-Content-Type-Options", "nosniff");
        // HTML, SVG, XML…: never run as a page of this origin, which every world shares.
        for (const [name, value] of activeContentHeaders(result.meta.contentType, options.activeFileSandbox)) res.setHeader(name, value);
        res.setHeader("Content-Length", result.meta.size);
        if ("body" in result) {
          res.end(req.method === "HEAD" ? undefined : result.body);
          return;
        }
        if (req.method === "HEAD") {
          result.stream.destroy();
          res.end();
          return;
        }
        // Paced by the client: S3 is read only as fast as the response drains (a client that stops
        // reading is cut by the send timeout, which frees the S3 stream too).
        await pipeline(result.stream, res).catch((err: unknown) => {
          if (!res.destroyed) res.destroy(err as Error);
        });
        return;
      }
      case "PUT": {
        const principal = await authorize(req, fp);
        // JSON files are UTF-8 (RFC 8259): a body declared in another charset is refused, never stored.
        if (isJsonExtension(fp.extension)) assertUtf8Charset(req.headers["content-type"]);
        const cond = conditions(req);
        const result = await files.put(fp, await body(req, res, fp.extension === "wam"), cond);
        written(res, fp, principal, result, result.created ? 201 : 200);
        return;
      }
      case "PATCH": {
        const principal = await authorize(req, fp);
        const type = (req.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase();
        if (type !== JSON_PATCH) {
          throw new AppError(415, "unsupported-media-type", `PATCH takes '${JSON_PATCH}', not '${type || "no content type"}'.`, {
            headers: { "Accept-Patch": JSON_PATCH },
          });
        }
        assertUtf8Charset(req.headers["content-type"], { "Accept-Patch": JSON_PATCH });
        const cond = conditions(req);
        const ops = parsePatch(await body(req, res, true), options.maxPatchOperations);
        const result = await files.patch(fp, ops, cond);
        written(res, fp, principal, result, 200);
        return;
      }
      case "DELETE": {
        await authorize(req, fp);
        await files.remove(fp, conditions(req));
        res.status(204).end();
        return;
      }
    }
  };

  const router = express.Router({ caseSensitive: true });
  router
    .route(FILE_ROUTE)
    .get(handler)
    .head(handler)
    .put(handler)
    .patch(handler)
    .delete(handler)
    .options(preflight)
    .all((req) => {
      throw new AppError(405, "method-not-allowed", `${req.method} is not supported on files.`, { headers: { Allow: ALLOWED } });
    });
  return router;
}

/** Room URL of a `.wam` file (spec: "Room URL shape"). */
export function roomUrl(playUrl: string, fp: FilePath, customDomain: string | null): string {
  const path = encodeFilePath(fp.path);
  return customDomain ? `https://${customDomain}/@/${path}` : `${playUrl}/@/${fp.organization}/${fp.world}/${path}`;
}

/**
 * CORS: the play client reads rooms from other origins and browser map editors write with a bearer
 * key (no cookies), so any origin may call. Preflights are answered by the files route, the only one
 * a browser sends non-simple requests to.
 */
export const cors: RequestHandler = (_req, res, next) => {
  res.setHeader("Access-Control-Allow-Origin", "*");
  res.setHeader("Access-Control-Expose-Headers", "ETag, Location, WWW-Authenticate, Retry-After");
  next();
};

/** `OPTIONS` of a file: the CORS preflight. */
const preflight: RequestHandler = (_req, res) => {
  res.setHeader("Access-Control-Allow-Methods", ALLOWED);
  res.setHeader("Access-Control-Allow-Headers", "Authorization, Content-Type, If-Match, If-None-Match");
  res.setHeader("Access-Control-Max-Age", "600");
  res.setHeader("Allow", ALLOWED);
  res.status(204).end();
};
