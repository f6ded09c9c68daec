/**
 * Each zone's share of the copies under the zone rule. A copy moves only into a zone holding fewer copies of its
 * partition than the zone it leaves keeps, so what a zone holds is bounded on both sides: it keeps at least as many
 * copies of a partition as an even spread gives it (fewer only if it holds fewer now), and takes no more than an
 * even spread gives it (more only if it holds more now), nor more than it has nodes. A zone whose capacity's share
 * lies outside those bounds holds what the bound says, and the other zones share the rest by capacity: the demo's
 * z3, one node of five, holds a copy of every partition where the capacity's share is three fifths of them. A node's
 * share of what its zone holds then goes by its capacity. Measured against the plain capacity's share, such a node
 * sits above its band for good and the nodes of the other zones below theirs, with no move to close either.
 */

/** What the computation reads: node i's zone, capacity and whether it stays; partition p's copies (node indexes). */
export interface ZoneInput {
  zone: readonly string[];
  cap: readonly number[];
  stays: readonly boolean[];
  partitions: number;
  rf: (p: number) => number;
  copies: (p: number, visit: (node: number) => void) => void;
  /** The copies the nodes that stay hold in all: the sum of the zones' shares. */
  total: number;
}

/**
 * Per node, its share of the copies over its capacity's share (1 where the zone rule binds nothing, and for a node
 * that does not stay): what the copy-borne dimensions' shares are scaled by.
 */
export function zoneFactors(input: ZoneInput): Float64Array {
  const n = input.zone.length;
  const factor = new Float64Array(n).fill(1);
  const zoneIndex = new Map<string, number>();
  const zoneOf = new Int32Array(n).fill(-1);
  for (let i = 0; i < n; i++) {
    if (!input.stays[i] || !(input.cap[i]! > 0)) continue;
    let z = zoneIndex.get(input.zone[i]!);
    if (z === undefined) zoneIndex.set(input.zone[i]!, (z = zoneIndex.size));
    zoneOf[i] = z;
  }
  const zones = zoneIndex.size;
  if (zones < 2 || !(input.total > 0)) return factor;
  const cap = new Float64Array(zones);
  const nodes = new Int32Array(zones);
  for (let i = 0; i < n; i++) {
    const z = zoneOf[i]!;
    if (z < 0) continue;
    cap[z] = cap[z]! + input.cap[i]!;
    nodes[z] = nodes[z]! + 1;
  }
  // Bounds per zone, summed over partitions. A zone holding none of p's copies is bounded by the even spread alone,
  // so that part is summed by replication factor; only the zones holding copies are visited per partition.
  const low = new Float64Array(zones);
  const high = new Float64Array(zones);
  const byRf = new Map<number, number>();
  const held = new Int32Array(zones);
  const touched: number[] = [];
  for (let p = 0; p < input.partitions; p++) {
    const r = input.rf(p);
    byRf.set(r, (byRf.get(r) ?? 0) + 1);
    input.copies(p, (c) => {
      const z = zoneOf[c]!;
      if (z < 0) return;
      if (held[z] === 0) touched.push(z);
      held[z] = held[z]! + 1;
    });
    const floor = Math.floor(r / zones);
    const ceil = Math.ceil(r / zones);
    for (const z of touched) {
      low[z] = low[z]! + Math.min(held[z]!, floor);
      high[z] = high[z]! + Math.max(0, held[z]! - Math.min(ceil, nodes[z]!));
      held[z] = 0;
    }
    touched.length = 0;
  }
  for (const [r, count] of byRf) for (let z = 0; z < zones; z++) high[z] = high[z]! + count * Math.min(Math.ceil(r / zones), nodes[z]!);
  let lowSum = 0;
  let highSum = 0;
  for (let z = 0; z < zones; z++) {
    lowSum += low[z]!;
    highSum += high[z]!;
  }
  // No spread the rule allows holds the total (copies on nodes leaving and lost ones count in it): plain capacity.
  if (input.total < lowSum || input.total > highSum) return factor;
  const held_ = (lambda: number, z: number): number => Math.min(high[z]!, Math.max(low[z]!, lambda * cap[z]!));
  const sum = (lambda: number): number => {
    let s = 0;
    for (let z = 0; z < zones; z++) s += held_(lambda, z);
    return s;
  };
  // The sum is monotone in lambda: bisect for the lambda at which the zones hold the total.
  let lo = 0;
  let hi = 0;
  for (let z = 0; z < zones; z++) hi = Math.max(hi, high[z]! / cap[z]!);
  for (let k = 0; k < 60; k++) {
    const mid = (lo + hi) / 2;
    if (sum(mid) < input.total) lo = mid;
    else hi = mid;
  }
  let activeCap = 0;
  for (let z = 0; z < zones; z++) activeCap += cap[z]!;
  const perCap = input.total / activeCap;
  for (let i = 0; i < n; i++) {
    const z = zoneOf[i]!;
    // Where no bound binds, the bisection's last bits would still nudge every score: plain capacity, exactly.
    if (z >= 0) {
      const f = held_(hi, z) / cap[z]! / perCap;
      factor[i] = Math.abs(f - 1) < 1e-9 ? 1 : f;
    }
  }
  return factor;
}
