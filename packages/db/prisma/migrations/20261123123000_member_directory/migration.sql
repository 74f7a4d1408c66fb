-- Member directory of the Inbound API (issue 16): members, their consent decisions per purpose,
-- and deletion markers. Written only by MemberDirectory (packages/db/src/member-directory.ts),
-- which also checks `type` (member or visitor): a CHECK constraint crashes the offline (WASM)
-- Prisma engine when `migrate diff` introspects it.

-- CreateTable
CREATE TABLE "members" (
    "world_id" UUID NOT NULL,
    "uuid" TEXT NOT NULL,
    "name" TEXT,
    "name_at" TIMESTAMPTZ(3),
    "email" TEXT NOT NULL,
    "type" TEXT NOT NULL,
    "profile_at" TIMESTAMPTZ(3) NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "members_pkey" PRIMARY KEY ("world_id","uuid")
);

-- CreateTable
CREATE TABLE "member_consents" (
    "world_id" UUID NOT NULL,
    "member_uuid" TEXT NOT NULL,
    "purpose" TEXT NOT NULL,
    "granted" BOOLEAN,
    "decided_at" TIMESTAMPTZ(3) NOT NULL,
    "decided_by" TEXT NOT NULL,

    CONSTRAINT "member_consents_pkey" PRIMARY KEY ("world_id","member_uuid","purpose")
);

-- CreateTable
CREATE TABLE "member_deletions" (
    "world_id" UUID NOT NULL,
    "uuid" TEXT NOT NULL,
    "deleted_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "member_deletions_pkey" PRIMARY KEY ("world_id","uuid")
);

-- AddForeignKey
ALTER TABLE "members" ADD CONSTRAINT "members_world_id_fkey" FOREIGN KEY ("world_id") REFERENCES "worlds"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "member_consents" ADD CONSTRAINT "member_consents_world_id_member_uuid_fkey" FOREIGN KEY ("world_id", "member_uuid") REFERENCES "members"("world_id", "uuid") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "member_deletions" ADD CONSTRAINT "member_deletions_world_id_fkey" FOREIGN KEY ("world_id") REFERENCES "worlds"("id") ON DELETE CASCADE ON UPDATE CASCADE;
