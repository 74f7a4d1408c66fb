/**
 * The checks of the Grafana dashboards under infra/grafana: every PromQL query (panel targets and
 * template variables) parses with Prometheus's own grammar (`@prometheus-io/lezer-promql`, the one
 * its web UI uses), and every metric it names is one a service exports. The exported names are
 * read from the services' `/metrics` text (the test scrapes the running processes), never from a
 * list kept by hand. Each violation names the file, the panel or variable, and the query.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parser } from "@prometheus-io/lezer-promql";
import type { PromExposition } from "@vw/testing";

/** A dashboard file as Grafana exports it (only the fields the checks read are typed). */
export interface DashboardFile {
  file: string;
  json: Dashboard;
}

interface Target {
  refId?: string;
  expr?: string;
  datasource?: { type?: string; uid?: string };
}

interface Panel {
  id?: number;
  type?: string;
  title?: string;
  datasource?: { type?: string; uid?: string };
  targets?: Target[];
  /** A collapsed row keeps its panels inside it. */
  panels?: Panel[];
}

interface Variable {
  name: string;
  type: string;
  query?: string | { query?: string };
}

export interface Dashboard {
  uid?: string;
  title?: string;
  panels?: Panel[];
  templating?: { list?: Variable[] };
}

/** One PromQL query of a dashboard and where it sits, for the messages. */
export interface DashboardQuery {
  where: string;
  expr: string;
}

/** Reads every `*.json` of `dir` (sorted by name). */
export function loadDashboards(dir: string): DashboardFile[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith(".json"))
    .sort()
    .map((file) => ({ file, json: JSON.parse(readFileSync(join(dir, file), "utf8")) as Dashboard }));
}

/** Every panel, those inside collapsed rows included. */
function allPanels(panels: Panel[] = []): Panel[] {
  return panels.flatMap((p) => [p, ...allPanels(p.panels)]);
}

/**
 * The PromQL of a dashboard: each panel target's `expr`, and each query variable's selector
 * (`label_values(<selector>, label)` and `query_result(<expr>)`; `label_values(label)` names no metric).
 */
export function dashboardQueries(d: DashboardFile): DashboardQuery[] {
  const out: DashboardQuery[] = [];
  for (const p of allPanels(d.json.panels)) {
    for (const t of p.targets ?? []) {
      if (typeof t.expr === "string") out.push({ where: `${d.file}: panel "${p.title}" (id ${p.id}) target ${t.refId}`, expr: t.expr });
    }
  }
  for (const v of d.json.templating?.list ?? []) {
    if (v.type !== "query") continue;
    const text = typeof v.query === "string" ? v.query : (v.query?.query ?? "");
    const where = `${d.file}: variable $${v.name}`;
    const labelValues = /^\s*label_values\(\s*(.+),\s*[a-zA-Z_]\w*\s*\)\s*$/s.exec(text);
    const queryResult = /^\s*query_result\(\s*(.+)\)\s*$/s.exec(text);
    if (labelValues) out.push({ where, expr: labelValues[1]! });
    else if (queryResult) out.push({ where, expr: queryResult[1]! });
    else if (!/^\s*label_values\(\s*[a-zA-Z_]\w*\s*\)\s*$/.test(text)) out.push({ where, expr: text });
  }
  return out;
}

/**
 * Grafana's macros, replaced by what Grafana substitutes before Prometheus sees the query:
 * `$__rate_interval` and friends are durations; other variables appear inside label matchers'
 * strings, where the grammar takes any text.
 */
function withMacrosExpanded(expr: string): string {
  return expr.replace(/\$__(rate_interval|interval|range)\b/g, "5m").replace(/\$\{__(rate_interval|interval|range)\}/g, "5m");
}

/**
 * The metric names a PromQL expression selects, or the reason it cannot be checked: a syntax
 * error, or a selector without a literal name (`{__name__=~"..."}` could match anything).
 */
export function metricNames(expr: string): { names: string[]; errors: string[] } {
  const text = withMacrosExpanded(expr);
  const tree = parser.parse(text);
  const names: string[] = [];
  const errors: string[] = [];
  tree.iterate({
    enter: (node) => {
      if (node.type.isError) {
        errors.push(`does not parse at offset ${node.from}: ${JSON.stringify(text.slice(Math.max(0, node.from - 20), node.to + 20))}`);
        return false;
      }
      if (node.name !== "VectorSelector") return undefined;
      const identifier = node.node.getChild("Identifier");
      if (identifier) names.push(text.slice(identifier.from, identifier.to).trim());
      else errors.push(`selector without a metric name: ${text.slice(node.from, node.to)}`);
      return false;
    },
  });
  return { names: [...new Set(names)], errors };
}

/**
 * Every series name an exposition can carry: each declared family, plus `_bucket`, `_sum` and
 * `_count` for histograms and `_sum` and `_count` for summaries. Families are read from the
 * `# TYPE` lines, so a labelled histogram with no observation yet still counts.
 */
export function exportedNames(expositions: readonly PromExposition[]): Set<string> {
  const names = new Set<string>();
  for (const exp of expositions) {
    for (const [family, type] of exp.types) {
      names.add(family);
      if (type === "histogram") for (const suffix of ["_bucket", "_sum", "_count"]) names.add(`${family}${suffix}`);
      if (type === "summary") for (const suffix of ["_sum", "_count"]) names.add(`${family}${suffix}`);
    }
    for (const sample of exp.samples) names.add(sample.name);
  }
  return names;
}

/**
 * The violations of a set of dashboards: a query that does not parse or names a metric no
 * service exports, a panel or variable on a data source other than the `$datasource` variable
 * (a fixed data source name breaks the import elsewhere), two dashboards with one uid, two panels
 * of a dashboard with one id.
 */
export function checkDashboards(dashboards: readonly DashboardFile[], exported: ReadonlySet<string>): string[] {
  const violations: string[] = [];
  const uids = new Map<string, string>();
  for (const d of dashboards) {
    if (!d.json.uid || !d.json.title) violations.push(`${d.file}: no uid or title`);
    else if (uids.has(d.json.uid)) violations.push(`${d.file}: uid ${d.json.uid} is also ${uids.get(d.json.uid)}'s`);
    else uids.set(d.json.uid, d.file);

    const ids = new Set<number>();
    for (const p of allPanels(d.json.panels)) {
      if (typeof p.id !== "number" || ids.has(p.id)) violations.push(`${d.file}: panel "${p.title}" has a missing or repeated id ${p.id}`);
      else ids.add(p.id);
      if (p.type === "row") continue;
      if ((p.targets ?? []).length === 0) violations.push(`${d.file}: panel "${p.title}" has no query`);
      for (const ds of [p.datasource, ...(p.targets ?? []).map((t) => t.datasource)]) {
        if (ds?.uid !== "${datasource}") violations.push(`${d.file}: panel "${p.title}" uses data source ${JSON.stringify(ds)}, not the $datasource variable`);
      }
    }

    const queries = dashboardQueries(d);
    if (queries.length === 0) violations.push(`${d.file}: no query at all`);
    for (const q of queries) {
      const { names, errors } = metricNames(q.expr);
      for (const e of errors) violations.push(`${q.where}: ${e}`);
      for (const name of names) if (!exported.has(name)) violations.push(`${q.where}: ${name} is exported by no service (${q.expr})`);
    }
  }
  return violations;
}
