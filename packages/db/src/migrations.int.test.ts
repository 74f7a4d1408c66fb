import { spawnSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "@jest/globals";

const packageDir = join(dirname(fileURLToPath(import.meta.url)), "..");

describe("prisma/migrations", () => {
  it("produce exactly prisma/schema.prisma (no schema change without its migration)", () => {
    // Replays the migrations into a throw-away shadow database and diffs the result with the schema.
    const run = spawnSync(
      "pnpm",
      ["exec", "prisma", "migrate", "diff", "--from-migrations", "prisma/migrations", "--to-schema-datamodel", "prisma/schema.prisma", "--exit-code"],
      { cwd: packageDir, env: process.env, encoding: "utf8", timeout: 60_000 },
    );
    expect({ status: run.status, stdout: run.stdout }).toEqual({ status: 0, stdout: expect.stringContaining("No difference detected") });
  });
});
