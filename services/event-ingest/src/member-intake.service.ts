import { memberUuidProblem, type MemberDirectory, type MemberRecord, type WorldDirectory } from "@vw/db";
import type { MemberProfileRequest } from "@vw/contracts";
import { AppError, notFound } from "@vw/service-kit";

/**
 * The platform's member intake: upserts and deletes directory records directly, for the people
 * no event announces (members invited by administrators produce no `visitor.registered`).
 * Writes go through the member directory, the tables' one writer.
 */
export class MemberIntakeService {
  constructor(
    private readonly worlds: WorldDirectory,
    private readonly members: MemberDirectory,
  ) {}

  /** Creates or replaces the profile; consents already recorded are kept. 404 for an unknown world. */
  async upsert(organization: string, world: string, uuid: string, profile: MemberProfileRequest): Promise<{ created: boolean; record: MemberRecord }> {
    const problem = memberUuidProblem(uuid);
    if (problem !== null) throw new AppError(400, "invalid-parameter", `The member uuid in the path ${problem}.`, { parameter: "uuid" });
    return this.members.upsert(await this.worldId(organization, world), uuid, profile);
  }

  /** Deletes the member and their consents; 404 when the world or the member is unknown. */
  async remove(organization: string, world: string, uuid: string): Promise<void> {
    const worldId = await this.worldId(organization, world);
    const removed = memberUuidProblem(uuid) === null && (await this.members.remove(worldId, uuid));
    // The uuid is not personal data, but it is not echoed either: nothing a log line needs.
    if (!removed) throw notFound(`World "${organization}/${world}" has no such member.`);
  }

  private async worldId(organization: string, world: string): Promise<string> {
    // A name that is not a slug names no world; the directory never sends it to the database.
    const id = await this.worlds.idOf(organization, world);
    if (id === null) throw new AppError(404, "unknown-world", `No such world: ${organization}/${world}.`);
    return id;
  }
}
