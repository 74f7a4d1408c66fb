/**
 * A burst of concurrent guesses at a credential, for the tests of the failed-authentication
 * throttle: `count` requests sent at once (all started before any answer is awaited), every one a
 * wrong guess but the one at `rightAt`, which carries the right credential.
 */

/** What a burst's requests were answered. */
export interface BurstOutcome {
  /** Each request's status, in sending order. */
  statuses: number[];
  /** The status of the request that carried the right credential. */
  right: number;
  /** How many requests got each status. */
  byStatus: Record<number, number>;
}

/**
 * Sends `count` (300) requests at once through `send(credential, index)`: `guess(index)` for each
 * but the one at `rightAt` (150), which sends `right`. Resolves once every answer is in.
 */
export async function credentialBurst(
  send: (credential: string, index: number) => Promise<number>,
  right: string,
  guess: (index: number) => string,
  options: { count?: number; rightAt?: number } = {},
): Promise<BurstOutcome> {
  const count = options.count ?? 300;
  const rightAt = options.rightAt ?? 150;
  const statuses = await Promise.all(Array.from({ length: count }, (_, i) => send(i === rightAt ? right : guess(i), i)));
  const byStatus: Record<number, number> = {};
  for (const s of statuses) byStatus[s] = (byStatus[s] ?? 0) + 1;
  return { statuses, right: statuses[rightAt]!, byStatus };
}
