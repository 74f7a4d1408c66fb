import { describe, expect, it } from "@jest/globals";
import { ConfigError } from "@vw/service-kit";
import { generateSecretBoxKey } from "@vw/webhook-core";
import { loadConfig } from "./config.js";

const base = { DATABASE_URL: "postgresql://db/vw", SECRETS_ENCRYPTION_KEY: generateSecretBoxKey() };

describe("delivery-worker config", () => {
  it("has the spec's defaults", () => {
    const config = loadConfig(base);
    expect(config).toMatchObject({
      port: 3004,
      deliveryTimeoutMs: 15_000,
      disableAfterFailures: 50,
      deliveryRetentionDays: 90,
      endpointUrlPolicy: "public-https",
      smtpUrl: null,
    });
    expect(config.retryDelays).toEqual([5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 50_400_000, 72_000_000, 86_400_000]);
  });

  it("honours a Redis database number and a short retry schedule", () => {
    const config = loadConfig({ ...base, REDIS_URL: "redis://cache:6379/3", RETRY_DELAYS: "100ms,1s" });
    expect(config.redisUrl).toBe("redis://cache:6379/3");
    expect(config.retryDelays).toEqual([100, 1000]);
  });

  it("names every bad variable, never echoing the encryption key", () => {
    let error: unknown;
    try {
      loadConfig({ DATABASE_URL: "mysql://x", SECRETS_ENCRYPTION_KEY: "not-a-key", RETRY_DELAYS: "1s,2s,3s,4s,5s,6s,7s,8s,9s,10s", SMTP_URL: "http://mail" });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const message = (error as Error).message;
    for (const name of ["DATABASE_URL", "SECRETS_ENCRYPTION_KEY", "RETRY_DELAYS", "SMTP_URL"]) expect(message).toContain(name);
    expect(message).not.toContain("not-a-key");
  });
});
