/** The Prometheus text parser the /metrics tests rely on refuses what Prometheus would refuse. */
import { describe, expect, it } from "@jest/globals";
import { parsePrometheusText, sampleSum } from "./prometheus.js";

const GOOD = [
  "# HELP vw_x_total Things.",
  "# TYPE vw_x_total counter",
  'vw_x_total{reason="a \\"quoted\\" one",kind="b"} 3',
  "# TYPE vw_h histogram",
  'vw_h_bucket{le="0.1"} 1',
  'vw_h_bucket{le="+Inf"} 2',
  "vw_h_sum 0.3",
  "vw_h_count 2",
  "",
].join("\n");

describe("parsePrometheusText", () => {
  it("reads samples, labels (escapes included), types and special values", () => {
    expect(sampleSum(parsePrometheusText("# TYPE g gauge\ng Nan\ng{a=\"1\"} +Inf\n"), "g", { a: "1" })).toBe(Infinity);
    const exp = parsePrometheusText(GOOD);
    expect(exp.types.get("vw_h")).toBe("histogram");
    expect(sampleSum(exp, "vw_x_total", { reason: 'a "quoted" one' })).toBe(3);
    expect(sampleSum(exp, "vw_h_count")).toBe(2);
  });

  it.each([
    ["no final newline", GOOD.trimEnd()],
    ["a sample without TYPE", `${GOOD}vw_other 1\n`],
    ["a malformed label", GOOD.replace('kind="b"', "kind=b")],
    ["a value that is not a number", GOOD.replace("vw_h_sum 0.3", "vw_h_sum abc")],
    ["a +Inf bucket that differs from _count", GOOD.replace("vw_h_count 2", "vw_h_count 5")],
    ["decreasing buckets", GOOD.replace('vw_h_bucket{le="0.1"} 1', 'vw_h_bucket{le="0.1"} 3')],
    ["an unknown type", GOOD.replace("counter", "counters")],
  ])("refuses %s", (_what, text) => {
    expect(() => parsePrometheusText(text)).toThrow();
  });
});
