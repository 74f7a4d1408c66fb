import { pino, type Logger } from "pino";

export type { Logger };

/**
 * JSON logger. Header and secret-bearing fields are redacted so a token never reaches the logs,
 * whatever a caller passes in.
 */
export function createLogger(service: string, level: string): Logger {
  return pino({
    level,
    base: { service },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: {
      paths: [
        "authorization",
        "*.authorization",
        "headers.authorization",
        "req.headers.authorization",
        "token",
        "*.token",
        "secret",
        "*.secret",
        "password",
        "*.password",
      ],
      censor: "[redacted]",
    },
  });
}
