import { Router } from "express";
import { validateMemberProfileRequest, type MemberResource } from "@vw/contracts";
import { badRequest } from "@vw/service-kit";
import { methodNotAllowed } from "./http-support.js";
import type { MemberIntakeService } from "./member-intake.service.js";

/** Path of one member record of the platform's intake, under `/v1`. */
export const MEMBER_INTAKE_PATH = "/worlds/:org/:world/members/:uuid";

/**
 * The platform's member intake (`INGEST_TOKEN`, this project's choice: the spec shows no route for
 * it). `PUT` `{name, email, type}` creates (201) or replaces (200) the profile and answers the
 * record; `DELETE` removes the member and their consents (204; 404 unknown). Answers carry
 * personal data, so they are never cached.
 */
export function membersRouter(intake: MemberIntakeService): Router {
  const router = Router({ caseSensitive: true });
  router.put(MEMBER_INTAKE_PATH, async (req, res) => {
    const { org, world, uuid } = req.params as { org: string; world: string; uuid: string };
    if (req.body === undefined) {
      throw badRequest("invalid-request", "The request needs a JSON body {name, email, type}.", [{ pointer: "", detail: "is required" }]);
    }
    const parsed = validateMemberProfileRequest(req.body);
    if (!parsed.ok) throw badRequest("invalid-request", "The member is not valid and nothing was stored; see `errors` for each invalid member.", parsed.errors);
    const { created, record } = await intake.upsert(org, world, uuid, parsed.value);
    res.status(created ? 201 : 200).set("Cache-Control", "no-store").json(record satisfies MemberResource);
  });
  router.delete(MEMBER_INTAKE_PATH, async (req, res) => {
    const { org, world, uuid } = req.params as { org: string; world: string; uuid: string };
    await intake.remove(org, world, uuid);
    res.status(204).end();
  });
  router.all(MEMBER_INTAKE_PATH, methodNotAllowed(["PUT", "DELETE"]));
  return router;
}
