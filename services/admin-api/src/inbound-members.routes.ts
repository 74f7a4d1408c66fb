import { Router } from "express";
import { memberUuidProblem, type ApiKeyPrincipal, type MemberDirectory } from "@vw/db";
import type { MemberResource } from "@vw/contracts";
import { AppError, clientAddress, notFound, type ApiKeyAuthenticator } from "@vw/service-kit";
import { methodNotAllowed } from "./http-support.js";

/** Prefix of the Inbound API on admin-api: `{base_url}` of the spec is admin-api's public address. */
export const INBOUND_API_PREFIX = "/api/v1";

/** The member record route, under {@link INBOUND_API_PREFIX}. */
export const MEMBER_RECORD_PATH = "/worlds/:worldSlug/members/:uuid";

/**
 * `GET /api/v1/worlds/{worldSlug}/members/{uuid}`: the member record (name, email, type, consent
 * answers) for a customer's receiver. Authenticated with an API key of the world (the same keys
 * as map-storage; the spec does not show the Inbound API's authentication, so this is this
 * project's choice): no or an invalid key 401 (429 once a client has sent too many bad keys), a key of another world 403, an unknown member or a
 * member of another world 404. The answer is personal data: `Cache-Control: no-store`, and the
 * only thing logged is the request line, whose uuid is an identifier, not a name or an email.
 */
export function inboundMembersRouter(auth: ApiKeyAuthenticator<ApiKeyPrincipal>, members: MemberDirectory): Router {
  const router = Router({ caseSensitive: true });
  router.get(MEMBER_RECORD_PATH, async (req, res) => {
    const { worldSlug, uuid } = req.params as { worldSlug: string; uuid: string };
    const principal = await auth.authenticate(req.headers.authorization, clientAddress(req));
    if (principal.world !== worldSlug) {
      throw new AppError(403, "wrong-world", `This API key belongs to world '${principal.organization}/${principal.world}', not '${worldSlug}'.`);
    }
    // A uuid the directory cannot hold names nobody: 404 without a query.
    const record = memberUuidProblem(uuid) === null ? await members.find(principal.worldId, uuid) : null;
    if (!record) throw notFound(`World '${worldSlug}' has no such member.`);
    res.set("Cache-Control", "no-store").json(record satisfies MemberResource);
  });
  router.all(MEMBER_RECORD_PATH, methodNotAllowed(["GET", "HEAD"]));
  return router;
}
