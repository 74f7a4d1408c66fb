/**
 * What the worker process is made of: parts, each started and closed by its own module (as a
 * BullMQ worker is: built running, `close()` lets what is in flight finish). compose.ts starts
 * them in order, each from what the earlier ones made, and closes them in the reverse order, so a
 * part never outlives what it uses: the drains close before the shard queues they wake through,
 * the notifications queue after the drains that add mails to it.
 */
import type { Logger } from "@vw/service-kit";

/** A running part of the process. */
export interface Part {
  /** For the log, when its close fails. */
  readonly name: string;
  /** Stops it: what is in flight finishes (within the part's own bound), nothing new starts. */
  close(): Promise<void>;
}

/** The parts started so far, closed in reverse. */
export class Parts {
  private readonly started: Part[] = [];

  constructor(private readonly logger: Logger) {}

  /** Records a started part (to close it later) and hands it back. */
  add<P extends Part>(part: P): P {
    this.started.push(part);
    return part;
  }

  /**
   * Makes the last `count` parts started close together, at their turn: parts that use none of one
   * another, so the shutdown waits for the slowest of them, not for their sum (each close is bounded,
   * and after a Redis outage BullMQ's close may take its whole bound: see bounded-close.ts).
   */
  closeTogether(name: string, count: number): void {
    const group = this.started.splice(this.started.length - count, count);
    this.started.push({
      name,
      close: async () => {
        await Promise.all(group.map((part) => part.close().catch((err: unknown) => this.logger.error({ err: err as Error, part: part.name }, "closing a part of the worker failed"))));
      },
    });
  }

  /**
   * Closes every part, last started first. A part whose close fails is logged and the others are
   * still closed (each holds what only it can release).
   */
  async close(): Promise<void> {
    for (const part of this.started.splice(0).reverse()) {
      await part.close().catch((err: unknown) => this.logger.error({ err: err as Error, part: part.name }, "closing a part of the worker failed"));
    }
  }

  /**
   * Starts the process's parts with `start`; when one of them fails to start, closes those already
   * started (their workers would otherwise take jobs in a process that is going away) and throws.
   */
  async startAll<T>(start: (parts: Parts) => Promise<T>): Promise<T> {
    try {
      return await start(this);
    } catch (err) {
      await this.close();
      throw err;
    }
  }
}
