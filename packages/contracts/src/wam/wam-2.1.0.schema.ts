/**
 * JSON Schema (draft 2020-12) of WAM files, version 2.1.0.
 *
 * It constrains only what the service spec shows ("Resources > WAM file"):
 * - required: `version`, `mapUrl`, `entities`, `areas` — every WAM file the product writes carries
 *   them. `entityCollections` and `metadata` are listed by the spec but not always present in real
 *   files, so they are optional.
 * - `entities` is an object and `areas` an array; the content of their items is not shown by the
 *   spec, so it is left open.
 * - `entityCollections[].type` is any string (`file` is the only value shown, not the only valid one).
 * - unknown members are allowed at the top level, in `metadata` and in collection items, so files
 *   written by newer editors are not refused for a field this schema does not know.
 *
 * The compiled schema uses the fixed internal `$id` below; the copy served over HTTP gets a `$id`
 * under the service's own address (see `wamSchemaDocument` in ./index.ts).
 */
export const WAM_2_1_0_SCHEMA_ID = "urn:vw:wam:2.1.0";

export const WAM_2_1_0_SCHEMA = {
  $schema: "https://json-schema.org/draft/2020-12/schema",
  $id: WAM_2_1_0_SCHEMA_ID,
  title: "WAM file 2.1.0",
  description:
    "A room of a virtual world: the TMJ map it is rendered from, plus the entities and areas added with the inline map editor.",
  type: "object",
  required: ["version", "mapUrl", "entities", "areas"],
  properties: {
    version: {
      title: "WAM format version",
      description: "Schema version of the WAM format; this schema validates version 2.1.0 only.",
      type: "string",
      const: "2.1.0",
    },
    mapUrl: {
      title: "Map URL",
      description: "Location of the TMJ file used to render the map.",
      type: "string",
      format: "uri",
    },
    entities: {
      title: "Entities",
      description: "Objects placed on the map, by id. An empty object is valid; item content is not constrained.",
      type: "object",
    },
    areas: {
      title: "Areas",
      description: "Interactive areas. An empty array is valid; item content is not constrained.",
      type: "array",
    },
    entityCollections: {
      title: "Entity collections",
      description: "Collections of objects offered in the inline map editor.",
      type: "array",
      items: {
        title: "Entity collection",
        description: "One collection: where its JSON file is and what kind it is.",
        type: "object",
        required: ["url", "type"],
        properties: {
          url: {
            description: "URL of a collection JSON file.",
            type: "string",
            format: "uri",
          },
          type: {
            description: "Kind of collection; `file` is the usual value, other values are accepted.",
            type: "string",
          },
        },
      },
    },
    metadata: {
      title: "Metadata",
      description: "Descriptive information about the map.",
      type: "object",
      properties: {
        name: { description: "Name of the map.", type: "string" },
        description: { description: "Shown when the map is shared.", type: "string" },
        thumbnail: { description: "Image URL.", type: "string" },
        copyright: { description: "Credits.", type: "string" },
      },
    },
  },
} as const;
