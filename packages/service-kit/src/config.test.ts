import { describe, expect, it } from "@jest/globals";
import { ConfigError, parseEnv, readCommon, readPlayUrl, readRedisKeyPrefix, redactCredentials, type EnvReader } from "./config.js";

/** The problems `build` records for `env` (fails the test when it records none). */
function problemsOf(env: Record<string, string>, build: (r: EnvReader) => unknown): string[] {
  try {
    parseEnv(env, (r) => ({ value: build(r) }));
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).message).toContain((err as ConfigError).problems.join("\n  - "));
    return (err as ConfigError).problems;
  }
  throw new Error(`accepted ${JSON.stringify(env)}`);
}

const databaseUrl = (r: EnvReader) => r.url("DATABASE_URL", undefined, ["postgres:", "postgresql:"]);
const redisUrl = (r: EnvReader) => r.url("REDIS_URL", "redis://127.0.0.1:6379", ["redis:", "rediss:"]);

describe("EnvReader.url never puts credentials in a problem", () => {
  it("repeats a malformed DATABASE_URL with its user and password replaced by ***", () => {
    const problems = problemsOf({ DATABASE_URL: "postgresql://user:s3cret@host:badport/db" }, databaseUrl);
    expect(problems).toEqual(['DATABASE_URL must be a URL, got "postgresql://***@host:badport/db"']);
    expect(problems.join("\n")).not.toContain("s3cret");
  });

  it.each([
    ["REDIS_URL", "redis://:s3cret@cache:port/0", 'REDIS_URL must be a URL, got "redis://***@cache:port/0"'],
    // A password with an unescaped '@' or '/': everything up to the last '@' goes.
    ["DATABASE_URL", "postgresql://app:s3c@ret@db.internal:54x32/vw", 'DATABASE_URL must be a URL, got "postgresql://***@db.internal:54x32/vw"'],
    ["DATABASE_URL", "postgresql://app:s3c/ret@db.internal:54x32/vw", 'DATABASE_URL must be a URL, got "postgresql://***@db.internal:54x32/vw"'],
    // No scheme at all: everything before the '@'.
    ["DATABASE_URL", "app s3cret@db.internal:5432/vw", 'DATABASE_URL must be a URL, got "***@db.internal:5432/vw"'],
    ["DATABASE_URL", "s3cret@db.internal", 'DATABASE_URL must be a URL, got "***@db.internal"'],
  ])("%s=%s is refused without the password", (name, value, message) => {
    const problems = problemsOf({ [name]: value }, name === "REDIS_URL" ? redisUrl : databaseUrl);
    expect(problems).toEqual([message]);
    expect(problems.join("\n")).not.toMatch(/s3c/);
  });

  it("names only the protocol of a well-formed URL with credentials and the wrong protocol", () => {
    expect(problemsOf({ DATABASE_URL: "mysql://root:s3cret@db/vw" }, databaseUrl)).toEqual(['DATABASE_URL must use postgres: or postgresql:, got "mysql:"']);
    expect(problemsOf({ REDIS_URL: "http://:s3cret@cache:6379" }, redisUrl)).toEqual(['REDIS_URL must use redis: or rediss:, got "http:"']);
  });

  it("repeats a malformed URL without credentials as it is", () => {
    expect(problemsOf({ PLAY_URL: "play.example.com" }, (r) => r.url("PLAY_URL"))).toEqual(['PLAY_URL must be a URL, got "play.example.com"']);
  });

  it("keeps valid URLs, credentials included, and drops trailing slashes", () => {
    const config = parseEnv({ DATABASE_URL: "postgresql://user:s3cret@db:5432/vw/", REDIS_URL: "redis://:pw@cache:6379/3" }, (r) => ({
      databaseUrl: databaseUrl(r),
      redisUrl: redisUrl(r),
    }));
    expect(config).toEqual({ databaseUrl: "postgresql://user:s3cret@db:5432/vw", redisUrl: "redis://:pw@cache:6379/3" });
  });
});

describe("the other readers redact a URL given by mistake", () => {
  // Kubernetes sets <SERVICE>_PORT=tcp://…; a DATABASE_URL pasted into the wrong variable is as likely.
  const mistaken = "postgresql://user:s3cret@db:5432/vw";

  it.each([
    ["int", (r: EnvReader) => r.int("PORT", 3000), 'PORT must be an integer, got "postgresql://***@db:5432/vw"'],
    ["bool", (r: EnvReader) => r.bool("PORT", false), 'PORT must be true or false, got "postgresql://***@db:5432/vw"'],
    ["oneOf", (r: EnvReader) => r.oneOf("PORT", ["a", "b"] as const, "a"), 'PORT must be one of a, b, got "postgresql://***@db:5432/vw"'],
  ])("%s", (_reader, build, message) => {
    const problems = problemsOf({ PORT: mistaken }, build);
    expect(problems).toEqual([message]);
    expect(problems.join("\n")).not.toContain("s3cret");
  });

  it("readCommon", () => {
    const problems = problemsOf({ PORT: mistaken, LOG_LEVEL: mistaken }, (r) => readCommon(r, 3000));
    expect(problems).toHaveLength(2);
    expect(problems.join("\n")).not.toContain("s3cret");
  });
});

describe("redactCredentials", () => {
  it.each([
    ["https://play.example.com/x", "https://play.example.com/x"],
    ["https://ops:pw@play.example.com", "https://***@play.example.com"],
    ["smtp://mailer:pw@smtp.example.com:587", "smtp://***@smtp.example.com:587"],
    ["user@", "***@"],
    ["", ""],
  ])("%j -> %j", (value, shown) => {
    expect(redactCredentials(value)).toBe(shown);
  });
});

describe("readPlayUrl", () => {
  const queryOrFragment = (value: string) => `PLAY_URL must have no query or fragment (a world's url is <PLAY_URL>/@/<org>/<world>), got "${value}"`;

  it.each([
    [{}, "https://play.localhost"],
    [{ PLAY_URL: "https://play.example.com/" }, "https://play.example.com"],
    [{ PLAY_URL: "http://localhost:8080/play//" }, "http://localhost:8080/play"],
  ])("accepts %j as %j", (env, playUrl) => {
    expect(parseEnv(env, (r) => ({ playUrl: readPlayUrl(r) })).playUrl).toBe(playUrl);
  });

  it.each([
    ["play.example.com", 'PLAY_URL must be a URL, got "play.example.com"'],
    ["ftp://play.example.com", 'PLAY_URL must use http: or https:, got "ftp:"'],
    ["https://play.example.com/?ref=mail", queryOrFragment("https://play.example.com/?ref=mail")],
    ["https://play.example.com#lobby", queryOrFragment("https://play.example.com#lobby")],
    ["https://play.example.com?", queryOrFragment("https://play.example.com?")],
    ["https://play.example.com/#", queryOrFragment("https://play.example.com/#")],
    ["https://ops:s3cret@play.example.com/?x=1", "PLAY_URL must not contain credentials (it is sent in every analytics.batch envelope)"],
    ["https://ops@play.example.com", "PLAY_URL must not contain credentials (it is sent in every analytics.batch envelope)"],
    ["https://ops:s3cret@play.example.com:99999", 'PLAY_URL must be a URL, got "https://***@play.example.com:99999"'],
  ])("refuses %j, saying why", (value, message) => {
    const problems = problemsOf({ PLAY_URL: value }, readPlayUrl);
    expect(problems).toEqual([message]);
    expect(problems.join("\n")).not.toContain("s3cret");
  });
});

describe("readRedisKeyPrefix", () => {
  const read = (fallback: string) => (r: EnvReader) => readRedisKeyPrefix(r, fallback);

  it.each([
    [{}, "vw", "vw"],
    [{}, "vw:map-storage:", "vw:map-storage:"],
    [{ REDIS_KEY_PREFIX: " vw-staging " }, "vw", "vw-staging"],
    [{ REDIS_KEY_PREFIX: "A.z_0:9-" }, "vw", "A.z_0:9-"],
    [{ REDIS_KEY_PREFIX: "x".repeat(64) }, "vw", "x".repeat(64)],
  ])("reads %j (default %j) as %j", (env, fallback, prefix) => {
    expect(parseEnv(env, (r) => ({ prefix: read(fallback)(r) })).prefix).toBe(prefix);
  });

  it.each([
    ["vw prod", 'REDIS_KEY_PREFIX must be 1-64 letters, digits, \'_\', \'.\', \':\' or \'-\', got "vw prod"'],
    ["vw/prod", 'REDIS_KEY_PREFIX must be 1-64 letters, digits, \'_\', \'.\', \':\' or \'-\', got "vw/prod"'],
    ["vw{1}", 'REDIS_KEY_PREFIX must be 1-64 letters, digits, \'_\', \'.\', \':\' or \'-\', got "vw{1}"'],
    ["x".repeat(65), `REDIS_KEY_PREFIX must be 1-64 letters, digits, '_', '.', ':' or '-', got "${"x".repeat(65)}"`],
    ["redis://:s3cret@cache:6379", 'REDIS_KEY_PREFIX must be 1-64 letters, digits, \'_\', \'.\', \':\' or \'-\', got "redis://***@cache:6379"'],
  ])("refuses %j", (value, message) => {
    expect(problemsOf({ REDIS_KEY_PREFIX: value }, read("vw"))).toEqual([message]);
  });
});

describe("readCommon HOST", () => {
  const host = (env: Record<string, string>) => parseEnv(env, (r) => ({ common: readCommon(r, 3000) })).common.host;

  it.each([
    [{}, "0.0.0.0"],
    [{ HOST: "127.0.0.1" }, "127.0.0.1"],
    [{ HOST: "::" }, "::"],
    [{ HOST: "::1" }, "::1"],
    [{ HOST: "localhost" }, "localhost"],
    [{ HOST: "api.internal.example" }, "api.internal.example"],
  ])("reads %j as %j", (env, expected) => {
    expect(host(env)).toBe(expected);
  });

  it.each(["http://0.0.0.0", "0.0.0.0:3000", "local host", "user:pw@host"])("refuses %j, naming HOST", (value) => {
    const problems = problemsOf({ HOST: value }, (r) => readCommon(r, 3000));
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(/^HOST must be an IP address or a host name/);
  });
});
