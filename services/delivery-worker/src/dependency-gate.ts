/**
 * Stops a worker from taking jobs while a dependency it needs is down, and lets it take them again
 * as soon as the dependency answers.
 *
 * Without it, every job fetched during a PostgreSQL outage fails within a millisecond, waits a
 * little in the delayed set and is fetched again: the queue churns for the whole outage, and the
 * first jobs after it wait for their backoff. With it, the first failure closes the gate (the
 * worker stops fetching; jobs in flight finish or fail on their own), probes run every
 * `probeIntervalMs`, and the first round where every probe answers opens it again.
 */
import type { Logger } from "@vw/service-kit";

/** A named check of one dependency: resolves when it answers. */
export interface GateProbe {
  dependency: string;
  check: () => Promise<unknown>;
}

/** What the gate opens and closes (a BullMQ worker: `pause(true)` and `resume()`). */
export interface Gated {
  pause(doNotWaitActive?: boolean): Promise<void>;
  resume(): void | Promise<void>;
}

/** Options of {@link DependencyGate}. */
export interface DependencyGateOptions {
  probes: readonly GateProbe[];
  logger: Logger;
  /** How often the probes run while the gate is closed. */
  probeIntervalMs?: number;
  /** Each probe's time limit. */
  probeTimeoutMs?: number;
}

/** See the file comment. */
export class DependencyGate {
  private readonly targets: Gated[] = [];
  private closedSince: number | null = null;
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;
  private readonly probeIntervalMs: number;
  private readonly probeTimeoutMs: number;

  constructor(private readonly options: DependencyGateOptions) {
    this.probeIntervalMs = options.probeIntervalMs ?? 500;
    this.probeTimeoutMs = options.probeTimeoutMs ?? 2000;
  }

  /** Adds a worker the gate pauses and resumes. */
  guard(target: Gated): void {
    this.targets.push(target);
  }

  /** True while closed (a dependency did not answer). */
  get isClosed(): boolean {
    return this.closedSince !== null;
  }

  /** A run failed because a dependency was unavailable: close the gate (once) and start probing. */
  close(reason: unknown): void {
    if (this.stopped || this.closedSince !== null) return;
    this.closedSince = Date.now();
    this.options.logger.warn(
      { reason: reason instanceof Error ? reason.message.split("\n")[0] : String(reason) },
      "a dependency is unavailable: taking no new deliveries until it answers",
    );
    for (const target of this.targets) {
      target.pause(true).catch((err: unknown) => this.options.logger.warn({ err: err as Error }, "pausing a worker failed"));
    }
    this.schedule();
  }

  /** Stops probing for good (shutdown); the workers are left as they are. */
  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.probe(), this.probeIntervalMs);
    this.timer.unref();
  }

  private async probe(): Promise<void> {
    this.timer = null;
    const down = await this.firstDown();
    if (this.stopped) return;
    if (down !== null) return this.schedule();
    const closedForMs = Date.now() - (this.closedSince ?? Date.now());
    this.closedSince = null;
    this.options.logger.info({ closedForMs }, "dependencies answer again: taking deliveries");
    for (const target of this.targets) {
      Promise.resolve(target.resume()).catch((err: unknown) => this.options.logger.warn({ err: err as Error }, "resuming a worker failed"));
    }
  }

  /** The first probe that does not answer in time, or null when all do. */
  private async firstDown(): Promise<string | null> {
    const results = await Promise.all(
      this.options.probes.map(async (probe) => {
        let timer: NodeJS.Timeout | undefined;
        try {
          await Promise.race([
            probe.check(),
            new Promise((_, reject) => {
              timer = setTimeout(() => reject(new Error("timeout")), this.probeTimeoutMs);
            }),
          ]);
          return null;
        } catch {
          return probe.dependency;
        } finally {
          clearTimeout(timer);
        }
      }),
    );
    return results.find((r) => r !== null) ?? null;
  }
}
