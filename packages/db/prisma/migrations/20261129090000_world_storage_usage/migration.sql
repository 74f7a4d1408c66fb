-- A storage quota per world: the operator's override of MAX_STORAGE_BYTES_PER_WORLD (NULL means the
-- platform default, and a nullable column without a default rewrites no rows), and the bytes a
-- world's files take in S3, counted by map-storage as it writes and deletes them (one row per
-- world once counted, see docs/decisions/0016-world-storage-usage-in-postgresql.md).
ALTER TABLE "worlds" ADD COLUMN "max_storage_bytes" BIGINT;

CREATE TABLE "world_storage_usage" (
    "world_id" UUID NOT NULL,
    "bytes_used" BIGINT NOT NULL,
    "counted_at" TIMESTAMPTZ(3) NOT NULL,
    "updated_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "world_storage_usage_pkey" PRIMARY KEY ("world_id")
);

ALTER TABLE "world_storage_usage" ADD CONSTRAINT "world_storage_usage_world_id_fkey" FOREIGN KEY ("world_id") REFERENCES "worlds"("id") ON DELETE CASCADE ON UPDATE CASCADE;
