import { uniqueViolationFields, type Organization, type PrismaClient } from "@vw/db";
import { AppError, notFound } from "@vw/service-kit";
import type { CreateOrganizationRequest, ListResource, OrganizationResource } from "@vw/contracts";
import { slugPage, slugCursor, toPage, type PageRequest } from "./http-support.js";

/** Organizations: create, read, list. */
export class OrganizationsService {
  constructor(private readonly prisma: PrismaClient) {}

  /** Creates an organization; 409 when the slug is taken. */
  async create(request: CreateOrganizationRequest): Promise<OrganizationResource> {
    try {
      const organization = await this.prisma.organization.create({ data: { slug: request.slug, name: request.name } });
      return toOrganizationResource(organization);
    } catch (err) {
      if (uniqueViolationFields(err)) {
        throw new AppError(409, "organization-exists", `An organization with the slug "${request.slug}" already exists.`, {
          errors: [{ pointer: "/slug", detail: "is already taken" }],
        });
      }
      throw err;
    }
  }

  /** The organization with this slug; 404 when there is none. */
  async get(slug: string): Promise<OrganizationResource> {
    return toOrganizationResource(await this.find(slug));
  }

  /** Organizations ordered by slug, one page at a time. */
  async list(page: PageRequest): Promise<ListResource<OrganizationResource>> {
    const { take, where } = slugPage(page);
    const rows = await this.prisma.organization.findMany({ where, orderBy: { slug: "asc" }, take });
    return toPage(rows, page, slugCursor, toOrganizationResource);
  }

  /** The stored organization; 404 when there is none. */
  async find(slug: string): Promise<Organization> {
    const organization = await this.prisma.organization.findUnique({ where: { slug } });
    if (!organization) throw notFound(`There is no organization "${slug}".`);
    return organization;
  }
}

export function toOrganizationResource(o: Organization): OrganizationResource {
  return { id: o.id, slug: o.slug, name: o.name, createdAt: o.createdAt.toISOString(), updatedAt: o.updatedAt.toISOString() };
}
