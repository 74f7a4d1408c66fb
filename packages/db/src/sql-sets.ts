/**
 * `expr` is one of the ids of `relation` (a row set of the same statement with a non-null `id`
 * column: a CTE), written so that it is planned as a probe of a hash of those ids whatever the
 * planner guesses of their number.
 *
 * `expr IN (SELECT id FROM relation)` is planned as a join, and a generic plan (a named prepared
 * statement's, after five calls) guesses ten rows for every array of parameters: it may make that
 * join a nested loop that scans the relation for each row, quadratic in the batch. `NOT IN` is not
 * turned into a join but into a hashed subplan; with ids that are never null, `NOT (x NOT IN …)`
 * means `x IN …`.
 */
export const amongIds = (expr: string, relation: string): string => `NOT (${expr} NOT IN (SELECT id FROM ${relation}))`;
