-- CreateTable
CREATE TABLE "dashboard_sessions" (
    "id" UUID NOT NULL,
    "world_id" UUID NOT NULL,
    "code_hash" TEXT NOT NULL,
    "code_expires_at" TIMESTAMPTZ(3) NOT NULL,
    "token_hash" TEXT,
    "exchanged_at" TIMESTAMPTZ(3),
    "capabilities" TEXT[],
    "expires_at" TIMESTAMPTZ(3) NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "dashboard_sessions_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "delivery_recoveries" (
    "id" UUID NOT NULL,
    "endpoint_id" UUID NOT NULL,
    "since" TIMESTAMPTZ(3) NOT NULL,
    "until" TIMESTAMPTZ(3) NOT NULL,
    "status" TEXT NOT NULL,
    "total" INTEGER NOT NULL,
    "requeued" INTEGER NOT NULL DEFAULT 0,
    "cursor_created_at" TIMESTAMPTZ(3),
    "cursor_id" UUID,
    "batch_stamp" TIMESTAMPTZ(3),
    "error" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "delivery_recoveries_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "dashboard_sessions_code_hash_key" ON "dashboard_sessions"("code_hash");

-- CreateIndex
CREATE UNIQUE INDEX "dashboard_sessions_token_hash_key" ON "dashboard_sessions"("token_hash");

-- CreateIndex
CREATE INDEX "dashboard_sessions_world_id_idx" ON "dashboard_sessions"("world_id");

-- CreateIndex
CREATE INDEX "dashboard_sessions_expires_at_idx" ON "dashboard_sessions"("expires_at");

-- CreateIndex
CREATE INDEX "delivery_recoveries_endpoint_id_created_at_idx" ON "delivery_recoveries"("endpoint_id", "created_at");

-- AddForeignKey
ALTER TABLE "dashboard_sessions" ADD CONSTRAINT "dashboard_sessions_world_id_fkey" FOREIGN KEY ("world_id") REFERENCES "worlds"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "delivery_recoveries" ADD CONSTRAINT "delivery_recoveries_endpoint_id_fkey" FOREIGN KEY ("endpoint_id") REFERENCES "webhook_endpoints"("id") ON DELETE CASCADE ON UPDATE CASCADE;

