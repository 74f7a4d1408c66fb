/**
 * Reads `/metrics` the way Prometheus does: a strict parser of the text exposition format
 * (version 0.0.4) that throws on any line Prometheus would reject, and checks each histogram's
 * internal consistency; plus a reader of one in-process prom-client metric's value.
 */

/** One sample line: `name{labels} value`. */
export interface PromSample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** A parsed exposition: samples in order, and each family's declared TYPE and HELP. */
export interface PromExposition {
  samples: PromSample[];
  types: Map<string, string>;
  help: Map<string, string>;
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES = new Set(["counter", "gauge", "histogram", "summary", "untyped"]);

/** Parses Prometheus text; throws naming the line on anything malformed. */
export function parsePrometheusText(text: string): PromExposition {
  const out: PromExposition = { samples: [], types: new Map(), help: new Map() };
  const lines = text.split("\n");
  if (lines.at(-1) !== "") throw new Error("exposition must end with a newline");
  lines.forEach((line, index) => {
    const where = `line ${index + 1} (${JSON.stringify(line.slice(0, 80))})`;
    if (line === "") return;
    if (line.startsWith("#")) {
      const m = /^# (HELP|TYPE) (\S+) ?(.*)$/.exec(line);
      if (!m) return; // other comments are allowed
      const [, kind, name, rest] = m as unknown as [string, string, string, string];
      if (!NAME.test(name)) throw new Error(`${where}: bad metric name`);
      if (kind === "TYPE") {
        if (!TYPES.has(rest)) throw new Error(`${where}: unknown type`);
        if (out.types.has(name)) throw new Error(`${where}: second TYPE for ${name}`);
        out.types.set(name, rest);
      } else out.help.set(name, rest);
      return;
    }
    out.samples.push(parseSample(line, where));
  });
  for (const sample of out.samples) {
    if (familyOf(sample.name, out.types) === undefined) throw new Error(`sample ${sample.name} has no TYPE line`);
  }
  checkHistograms(out);
  return out;
}

function parseSample(line: string, where: string): PromSample {
  const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)( -?\d+)?$/.exec(line);
  if (!m) throw new Error(`${where}: not a sample`);
  const labels: Record<string, string> = {};
  let rest = m[3] ?? "";
  while (rest.length > 0) {
    const lm = /^([^=]+)="((?:[^"\\]|\\["\\n])*)"(,|$)/.exec(rest);
    if (!lm || !LABEL_NAME.test(lm[1]!)) throw new Error(`${where}: bad labels`);
    if (lm[1]! in labels) throw new Error(`${where}: label ${lm[1]} twice`);
    labels[lm[1]!] = lm[2]!.replace(/\\n/g, "\n").replace(/\\(["\\])/g, "$1");
    rest = rest.slice(lm[0].length);
  }
  // Prometheus reads values with Go's ParseFloat: NaN and Inf in any case (prom-client writes "Nan").
  const raw = m[4]!;
  const special = /^([+-]?)(inf|infinity|nan)$/i.exec(raw);
  const value = special ? (special[2]!.toLowerCase() === "nan" ? NaN : special[1] === "-" ? -Infinity : Infinity) : Number(raw);
  if (Number.isNaN(value) && !special) throw new Error(`${where}: bad value`);
  return { name: m[1]!, labels, value };
}

/** The declared family a sample belongs to (histogram and summary samples carry a suffix). */
function familyOf(name: string, types: Map<string, string>): string | undefined {
  if (types.has(name)) return name;
  const base = name.replace(/_(bucket|sum|count|created)$/, "");
  const type = types.get(base);
  return type === "histogram" || type === "summary" ? base : undefined;
}

/** Buckets never decrease with `le`, and the `+Inf` bucket equals `_count`, per label set. */
function checkHistograms(exp: PromExposition): void {
  for (const [family, type] of exp.types) {
    if (type !== "histogram") continue;
    const series = new Map<string, { buckets: [number, number][]; count?: number }>();
    const keyOf = (labels: Record<string, string>): string =>
      JSON.stringify(Object.entries(labels).filter(([k]) => k !== "le").sort(([a], [b]) => a.localeCompare(b)));
    for (const s of exp.samples) {
      if (s.name !== `${family}_bucket` && s.name !== `${family}_count`) continue;
      const entry = series.get(keyOf(s.labels)) ?? { buckets: [] };
      series.set(keyOf(s.labels), entry);
      if (s.name.endsWith("_count")) entry.count = s.value;
      else entry.buckets.push([s.labels.le === "+Inf" ? Infinity : Number(s.labels.le), s.value]);
    }
    for (const [key, { buckets, count }] of series) {
      buckets.sort(([a], [b]) => a - b);
      buckets.forEach(([, v], i) => {
        if (i > 0 && v < buckets[i - 1]![1]) throw new Error(`${family}${key}: bucket counts decrease`);
      });
      if (buckets.at(-1)?.[0] !== Infinity || buckets.at(-1)?.[1] !== count) throw new Error(`${family}${key}: +Inf bucket differs from _count`);
    }
  }
}

/** Samples named `name` whose labels include every label of `labels`. */
export function findSamples(exp: PromExposition, name: string, labels: Record<string, string> = {}): PromSample[] {
  return exp.samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
}

/** Sum of the samples named `name` that carry `labels` (0 when there is none). */
export function sampleSum(exp: PromExposition, name: string, labels: Record<string, string> = {}): number {
  return findSamples(exp, name, labels).reduce((n, s) => n + s.value, 0);
}

/** A prom-client metric's current value for one label set (0 when never set), read in-process. */
export async function metricValue(metric: { get(): unknown }, labels: Record<string, string> = {}, metricName?: string): Promise<number> {
  const { values } = (await metric.get()) as { values: { labels: Record<string, unknown>; value: number; metricName?: string }[] };
  const want = Object.entries(labels);
  const match = values.find(
    (v) =>
      (metricName === undefined || v.metricName === metricName) &&
      Object.keys(v.labels).length === want.length &&
      want.every(([k, val]) => v.labels[k] === val),
  );
  return match?.value ?? 0;
}
