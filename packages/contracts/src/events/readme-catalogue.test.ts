/**
 * Keeps the receivers' event catalogue (docs/webhook-events.md, "Event catalogue") honest: every
 * ```json sample in it must be a valid delivery and the very sample of the contracts (values and
 * member order), every delivered type must have its section with its sample, and the field tables
 * and the subscription tables (there and in the root README's "Event types") must match the schemas
 * and SUBSCRIPTION_OF_TYPE. Edit the page when the contracts change.
 */
import { describe, expect, it } from "@jest/globals";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { ANALYTICS_EVENT_SCHEMA } from "./analytics.schema.js";
import { ENVELOPE_SCHEMA } from "./envelope.schema.js";
import { DELIVERED_EVENT_TYPES, SUBSCRIPTION_OF_TYPE, isDeliveredEventType, type DeliveredEventType } from "./event-types.js";
import { EVENT_DATA_SCHEMAS } from "./payloads.schema.js";
import { LEGACY_AUTH_SAMPLE, sampleDelivery } from "./samples.js";
import { validateDelivered, validateEnvelope, validateLegacyAuthBody } from "./validators.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "../../../..");
const CATALOGUE_PATH = join(ROOT, "docs", "webhook-events.md");
const CATALOGUE_HEADING = "## Event catalogue";
/** The root README's summary of the types, whose subscription table must agree too. */
const README_PATH = join(ROOT, "README.md");
const README_TYPES_HEADING = "### Event types";

/**
 * The member order of `buildEnvelope` in @vw/webhook-core, which serialises every delivery. It is
 * written out here because contracts, a leaf package, must not import webhook-core.
 */
const ENVELOPE_MEMBER_ORDER = ["deliveryId", "apiVersion", "type", "timestamp", "world", "data", "test"];

interface Line {
  text: string;
  /** 1-based line number in the file, for failure messages. */
  number: number;
  /** Inside a fenced code block (fence lines included). */
  fenced: boolean;
}

interface JsonBlock {
  line: number;
  text: string;
}

interface Section {
  heading: string;
  lines: Line[];
}

function linesOf(markdown: string): Line[] {
  let fenced = false;
  return markdown.split("\n").map((text, i) => {
    const fence = /^\s*```/.test(text);
    const line = { text, number: i + 1, fenced: fenced || fence };
    if (fence) fenced = !fenced;
    return line;
  });
}

/**
 * A section: from its heading to the next heading of its level or above (headings in code blocks
 * do not count).
 */
function sectionLines(all: Line[], heading: string, file: string): Line[] {
  const level = heading.indexOf(" ");
  const start = all.findIndex((l) => !l.fenced && l.text.trim() === heading);
  if (start === -1) throw new Error(`${file} has no "${heading}" heading`);
  const rest = all.slice(start + 1);
  const end = rest.findIndex((l) => !l.fenced && new RegExp(`^#{1,${level}} `).test(l.text));
  return end === -1 ? rest : rest.slice(0, end);
}

/** The catalogue cut at its `###` headings; the part before the first one has the heading "". */
function sectionsOf(lines: Line[]): Section[] {
  const sections: Section[] = [{ heading: "", lines: [] }];
  for (const line of lines) {
    if (!line.fenced && line.text.startsWith("### ")) sections.push({ heading: line.text.slice(4).trim(), lines: [] });
    else sections[sections.length - 1]!.lines.push(line);
  }
  return sections;
}

function jsonBlocksOf(lines: Line[]): JsonBlock[] {
  const blocks: JsonBlock[] = [];
  let current: { line: number; body: string[] } | null = null;
  for (const line of lines) {
    if (current === null) {
      if (/^\s*```json\s*$/.test(line.text)) current = { line: line.number, body: [] };
    } else if (/^\s*```\s*$/.test(line.text)) {
      blocks.push({ line: current.line, text: current.body.join("\n") });
      current = null;
    } else {
      current.body.push(line.text);
    }
  }
  if (current !== null) throw new Error(`unclosed json block at docs/webhook-events.md:${current.line}`);
  return blocks;
}

/** A JSON object, or undefined when `text` is not the JSON of an object (a test then says so). */
function parseOrUndefined(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** The delivered type a section is about: its heading is that type in backticks. */
function typeOfSection(section: Section): DeliveredEventType | undefined {
  const match = /^`([^`]+)`$/.exec(section.heading);
  return match && isDeliveredEventType(match[1]) ? match[1] : undefined;
}

/** The body rows (cells trimmed) of the tables whose first header cell is `firstHeader`. */
function tableRows(lines: Line[], firstHeader: string): string[][] {
  const tables: string[][][] = [];
  let current: string[][] | null = null;
  for (const line of lines) {
    const text = line.text.trim();
    if (line.fenced || !text.startsWith("|")) {
      current = null;
      continue;
    }
    if (current === null) tables.push((current = []));
    current.push(text.replace(/^\||\|$/g, "").split("|").map((cell) => cell.trim()));
  }
  // Row 0 is the header, row 1 the |---| separator.
  return tables.filter((table) => table[0]?.[0] === firstHeader).flatMap((table) => table.slice(2));
}

/** The names in backticks of a cell (`startedAt`, `endedAt` gives both). */
function codeNames(cell: string): string[] {
  return [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]!);
}

type SchemaNode = { properties?: Record<string, SchemaNode>; items?: SchemaNode };

/** Whether a dotted path (`room.url`, `data.user.uuid`) names a member of `schema`, through arrays too. */
function hasPath(schema: SchemaNode, path: string): boolean {
  let node: SchemaNode | undefined = schema;
  for (const part of path.split(".")) {
    node = node?.properties?.[part] ?? node?.items?.properties?.[part];
    if (node === undefined) return false;
  }
  return true;
}

const catalogue = sectionLines(linesOf(readFileSync(CATALOGUE_PATH, "utf8")), CATALOGUE_HEADING, "docs/webhook-events.md");
const readmeTypes = sectionLines(linesOf(readFileSync(README_PATH, "utf8")), README_TYPES_HEADING, "README.md");
const sections = sectionsOf(catalogue);
const blocks = sections.flatMap((section) => jsonBlocksOf(section.lines).map((block) => ({ section, block })));

describe("the receivers' event catalogue", () => {
  it("has JSON samples", () => {
    expect(blocks.length).toBeGreaterThan(0);
  });

  it.each(DELIVERED_EVENT_TYPES.map((t) => [t]))("has a section for %s with its sample", (type: DeliveredEventType) => {
    const section = sections.find((s) => typeOfSection(s) === type);
    expect(section).toBeDefined();
    const samples = jsonBlocksOf(section!.lines).map((b) => parseOrUndefined(b.text));
    expect(samples.map((s) => s?.["type"])).toContain(type);
    if (type === "member.connecting") expect(samples).toContainEqual(LEGACY_AUTH_SAMPLE);
  });

  const labelled = blocks.map(({ section, block }): [string, Section, JsonBlock] => [
    `docs/webhook-events.md:${block.line} (${section.heading || "introduction"})`,
    section,
    block,
  ]);
  describe.each(labelled)("sample at %s", (_name: string, section: Section, block: JsonBlock) => {
    const body = parseOrUndefined(block.text);
    const isLegacy = body !== undefined && !("type" in body) && body["action"] === "auth";

    it("is a JSON object", () => {
      expect(body).toBeDefined();
    });

    it("is a delivery the published schemas accept", () => {
      if (isLegacy) {
        expect(validateLegacyAuthBody(body)).toEqual({ ok: true, value: body });
        return;
      }
      expect(validateEnvelope(body)).toEqual({ ok: true, value: body });
      const type = body?.["type"];
      expect(isDeliveredEventType(type)).toBe(true);
      expect(validateDelivered(type as DeliveredEventType, body)).toEqual({ ok: true, value: body });
    });

    it("is the contracts' sample, member order included", () => {
      if (isLegacy) {
        expect(JSON.stringify(body)).toBe(JSON.stringify(LEGACY_AUTH_SAMPLE));
        return;
      }
      const type = body?.["type"];
      expect(isDeliveredEventType(type)).toBe(true);
      expect(JSON.stringify(body)).toBe(JSON.stringify(sampleDelivery(type as DeliveredEventType)));
      const order = Object.keys(body ?? {});
      expect(order).toEqual(ENVELOPE_MEMBER_ORDER.filter((member) => order.includes(member)));
    });

    it("sits in the section of its type", () => {
      expect(typeOfSection(section)).toBe(isLegacy ? "member.connecting" : body?.["type"]);
    });
  });

  it("lists the envelope's members exactly, in the introduction", () => {
    const names = tableRows(sections[0]!.lines, "field").flatMap((row) => codeNames(row[0] ?? ""));
    expect(names).toEqual(Object.keys(ENVELOPE_SCHEMA.properties));
  });

  it.each([
    ["docs/webhook-events.md", sections[0]!.lines],
    ["README.md (Event types)", readmeTypes],
  ])("%s maps every type to its subscription as SUBSCRIPTION_OF_TYPE does", (_file: string, lines: Line[]) => {
    const rows = tableRows(lines, "subscription");
    const table = Object.fromEntries(rows.map((row) => [codeNames(row[1] ?? "")[0], codeNames(row[0] ?? "")[0] ?? null]));
    expect(table).toEqual(SUBSCRIPTION_OF_TYPE);
  });

  it.each(DELIVERED_EVENT_TYPES.map((t) => [t]))("documents the data members of %s, and no others", (type: DeliveredEventType) => {
    const section = sections.find((s) => typeOfSection(s) === type)!;
    const dataSchema = EVENT_DATA_SCHEMAS[type] as SchemaNode;
    // The analytics section also tabulates the inner event, whose schema is separate.
    const schemas: SchemaNode[] = type === "analytics.batch" ? [dataSchema, ANALYTICS_EVENT_SCHEMA as SchemaNode] : [dataSchema];
    const names = tableRows(section.lines, "field").flatMap((row) => codeNames(row[0] ?? ""));
    expect(names.filter((name) => !schemas.some((schema) => hasPath(schema, name)))).toEqual([]);
    const topLevel = new Set(names.map((name) => name.split(".")[0]));
    expect(Object.keys(dataSchema.properties ?? {}).filter((member) => !topLevel.has(member))).toEqual([]);
  });
});
