/**
 * The resident memory of another process (a service spawned by a test), read from
 * `/proc/<pid>/status` (Linux): a sampler started before an attack and stopped after it gives the
 * largest RSS seen in between, so a test can bound how much one kind of request makes a service
 * grow, measured from outside it as an operator's memory limit sees it.
 */
import { readFileSync } from "node:fs";

/** The process's resident set size in bytes (`VmRSS`). */
export function residentBytes(pid: number): number {
  const m = /^VmRSS:\s+(\d+)\s+kB$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  if (!m) throw new Error(`no VmRSS in /proc/${pid}/status`);
  return Number(m[1]) * 1024;
}

/** A running sampler of one process's RSS. */
export interface RssSampler {
  /** RSS when the sampler started. */
  readonly baseline: number;
  /** Largest RSS sampled so far. */
  readonly peak: number;
  /** Stops sampling (one last sample first); returns the peak's growth over the baseline, in bytes. */
  stop(): number;
}

/** Samples `pid`'s RSS every `intervalMs` (20) until stopped. */
export function sampleRss(pid: number, intervalMs = 20): RssSampler {
  const baseline = residentBytes(pid);
  let peak = baseline;
  const sample = () => {
    try {
      peak = Math.max(peak, residentBytes(pid));
    } catch {
      // the process is gone: the samples so far stand
    }
  };
  const timer = setInterval(sample, intervalMs);
  return {
    baseline,
    get peak() {
      return peak;
    },
    stop() {
      sample();
      clearInterval(timer);
      return peak - baseline;
    },
  };
}
