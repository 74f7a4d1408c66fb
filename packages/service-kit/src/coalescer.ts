/**
 * Group commit for any store: what callers submit while earlier flushes run is flushed together,
 * so a statement's fixed cost (round trips, a transaction's commit, a queue's pipeline) is paid
 * once per batch instead of once per caller, and batches grow with the load. The delivery worker
 * coalesces its log reads and writes with it, event-ingest its intakes.
 */

interface Pending<In, Out> {
  input: In;
  resolve: (value: Out) => void;
  reject: (err: unknown) => void;
}

/** Options of {@link Coalescer}. */
export interface CoalescerOptions<In> {
  /** Largest batch, in items, or in `weight` when given (a batch always takes at least one item). */
  maxBatch: number;
  /** Flushes running at once: while one waits on its store, the next batch can be sent. */
  maxInFlight: number;
  /** An item's share of `maxBatch` (1 when absent): the events of a request, say. */
  weight?: (input: In) => number;
}

/**
 * Runs `flush` over what was submitted while earlier flushes were running, with at most
 * `maxInFlight` flushes at once; each caller gets its own output back (`flush` returns one per
 * input, in order), or the flush's error.
 */
export class Coalescer<In, Out> {
  private queue: Pending<In, Out>[] = [];
  private inFlight = 0;
  private scheduled = false;

  constructor(
    private readonly flush: (inputs: In[]) => Promise<Out[]>,
    private readonly options: CoalescerOptions<In>,
  ) {}

  submit(input: In): Promise<Out> {
    return new Promise<Out>((resolve, reject) => {
      this.queue.push({ input, resolve, reject });
      if (!this.scheduled && this.inFlight < this.options.maxInFlight) {
        // One tick lets what the same I/O event resolved join the batch.
        this.scheduled = true;
        setImmediate(() => {
          this.scheduled = false;
          this.pump();
        });
      }
    });
  }

  private pump(): void {
    while (this.queue.length > 0 && this.inFlight < this.options.maxInFlight) {
      const batch = this.queue.splice(0, this.batchLength());
      this.inFlight += 1;
      let outputs: Promise<Out[]>;
      try {
        outputs = this.flush(batch.map((b) => b.input));
      } catch (err) {
        outputs = Promise.reject(err);
      }
      outputs
        .then(
          (values) => batch.forEach((b, i) => b.resolve(values[i] as Out)),
          (err: unknown) => batch.forEach((b) => b.reject(err)),
        )
        .finally(() => {
          this.inFlight -= 1;
          this.pump();
        });
    }
  }

  /** How many queued items the next batch takes. */
  private batchLength(): number {
    const { weight, maxBatch } = this.options;
    if (!weight) return maxBatch;
    let total = 0;
    let n = 0;
    for (const pending of this.queue) {
      total += weight(pending.input);
      if (n > 0 && total > maxBatch) break;
      n += 1;
    }
    return n;
  }
}
