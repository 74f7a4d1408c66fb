import { describe, expect, it } from "@jest/globals";
import { WorldSettingsCache } from "./world-settings-cache.js";

const entry = (world: string, n = 0) => ({ world_id: world, n });

describe("WorldSettingsCache", () => {
  it("stores and serves nothing until it is active, and empties itself when deactivated", () => {
    const cache = new WorldSettingsCache<ReturnType<typeof entry>>();
    cache.set("a/b", entry("w1"), cache.snapshot());
    expect(cache.get("a/b")).toBeUndefined();
    cache.setActive(true);
    cache.set("a/b", entry("w1"), cache.snapshot());
    expect(cache.get("a/b")).toEqual(entry("w1"));
    cache.setActive(false);
    expect(cache.get("a/b")).toBeUndefined();
    cache.set("a/b", entry("w1"), cache.snapshot());
    expect(cache.get("a/b")).toBeUndefined();
    expect({ hits: cache.hits, misses: cache.misses }).toEqual({ hits: 1, misses: 3 });
  });

  it("does not store a read that started before an invalidation or a reconnect", () => {
    const cache = new WorldSettingsCache<ReturnType<typeof entry>>();
    cache.setActive(true);
    const before = cache.snapshot();
    cache.invalidate("some-other-world");
    cache.set("a/b", entry("w1"), before);
    expect(cache.get("a/b")).toBeUndefined();
    const beforeReconnect = cache.snapshot();
    cache.setActive(false);
    cache.setActive(true);
    cache.set("a/b", entry("w1"), beforeReconnect);
    expect(cache.get("a/b")).toBeUndefined();
  });

  it("evicts every key of the world named by a notification, and everything on *", () => {
    const cache = new WorldSettingsCache<ReturnType<typeof entry>>();
    cache.setActive(true);
    cache.set("org/old-slug", entry("w1"), cache.snapshot());
    cache.set("org/new-slug", entry("w1"), cache.snapshot());
    cache.set("org/other", entry("w2"), cache.snapshot());
    cache.invalidate("w1");
    expect(cache.get("org/old-slug")).toBeUndefined();
    expect(cache.get("org/new-slug")).toBeUndefined();
    expect(cache.get("org/other")).toEqual(entry("w2"));
    expect(cache.has("org/other")).toBe(true);
    cache.invalidate("*");
    expect(cache.has("org/other")).toBe(false);
    expect(cache.get("org/other")).toBeUndefined();
  });

  it("expires entries after maxAgeMs and holds at most maxEntries, dropping the oldest", () => {
    let now = 0;
    const cache = new WorldSettingsCache<ReturnType<typeof entry>>({ maxAgeMs: 1000, maxEntries: 2, now: () => now });
    cache.setActive(true);
    cache.set("k1", entry("w1"), cache.snapshot());
    now = 1000;
    expect(cache.get("k1")).toEqual(entry("w1"));
    now = 1001;
    expect(cache.get("k1")).toBeUndefined();
    cache.set("k1", entry("w1"), cache.snapshot());
    cache.set("k2", entry("w2"), cache.snapshot());
    cache.set("k3", entry("w3"), cache.snapshot());
    expect(cache.get("k1")).toBeUndefined();
    expect(cache.get("k2")).toEqual(entry("w2"));
    expect(cache.get("k3")).toEqual(entry("w3"));
  });
});
