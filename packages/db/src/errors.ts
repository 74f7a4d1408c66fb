import { Prisma } from "./generated/prisma/client.js";

/**
 * The columns of the unique constraint a write violated (Prisma P2002), or `undefined` when `err`
 * is not a unique violation. Column names are the database's (snake_case). With a driver adapter
 * Prisma reports them under `meta.driverAdapterError.cause.constraint` rather than `meta.target`,
 * so both places are read; an empty array means "unique violation, columns unknown".
 */
export function uniqueViolationFields(err: unknown): string[] | undefined {
  if (!(err instanceof Prisma.PrismaClientKnownRequestError) || err.code !== "P2002") return undefined;
  const meta = (err.meta ?? {}) as {
    target?: unknown;
    driverAdapterError?: { cause?: { constraint?: { fields?: unknown; index?: unknown } } };
  };
  const constraint = meta.driverAdapterError?.cause?.constraint;
  const candidates: unknown[] = [constraint?.fields, constraint?.index, meta.target];
  for (const c of candidates) {
    if (Array.isArray(c)) return c.map(String);
    if (typeof c === "string") return [c];
  }
  return [];
}

/** True when `err` is Prisma's "record to update/delete not found" (P2025). */
export function isRecordNotFound(err: unknown): boolean {
  return err instanceof Prisma.PrismaClientKnownRequestError && err.code === "P2025";
}
