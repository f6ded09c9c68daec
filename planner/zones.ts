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

/**
 * What the computation reads: node i's zone, capacity and whether it stays; partition p's replication factor and
 * its copies' node indexes, slots p * stride .. p * stride + copyCount[p] - 1 of copyNode (the planner's layout:
 * typed arrays, read in one tight loop, as this runs every tick over every partition).
 */
export interface ZoneInput {
  zone: readonly string[];
  cap: readonly number[];
  stays: readonly boolean[];
  rf: Uint8Array;
  copyCount: Uint8Array;
  copyNode: Int32Array;
  stride: number;
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
  const held = new Int32Array(zones);
  const { rf, copyCount, copyNode, stride } = input;
  const rfCount = new Float64Array(256);
  for (let p = 0; p < rf.length; p++) rfCount[rf[p]!] = rfCount[rf[p]!]! + 1;
  let activeCap = 0;
  for (let z = 0; z < zones; z++) activeCap += cap[z]!;
  const perCap = input.total / activeCap;
  // A zone holds at least an even spread's copies of the partitions it holds and at most an even spread's (or its
  // nodes') of each: where its capacity's share lies between those for every zone, no bound can bind, and the pass
  // over every copy below (a tenth of a tick at 100,000 partitions) is skipped.
  let free = true;
  for (let z = 0; z < zones && free; z++) {
    let atMost = 0;
    let atLeast = 0;
    for (let r = 1; r < rfCount.length; r++) {
      atMost += rfCount[r]! * Math.floor(r / zones);
      atLeast += rfCount[r]! * Math.min(Math.ceil(r / zones), nodes[z]!);
    }
    free = atMost <= perCap * cap[z]! + 1e-9 && perCap * cap[z]! <= atLeast + 1e-9;
  }
  if (free) return factor;
  for (let p = 0; p < rf.length; p++) {
    const r = rf[p]!;
    const floor = Math.floor(r / zones);
    const ceil = Math.ceil(r / zones);
    const from = p * stride;
    const to = from + copyCount[p]!;
    for (let i = from; i < to; i++) {
      const z = zoneOf[copyNode[i]!]!;
      if (z >= 0) held[z] = held[z]! + 1;
    }
    // Each zone once: the first of its copies adds the zone's count and clears it.
    for (let i = from; i < to; i++) {
      const z = zoneOf[copyNode[i]!]!;
      if (z < 0 || held[z] === 0) continue;
      low[z] = low[z]! + Math.min(held[z]!, floor);
      high[z] = high[z]! + Math.max(0, held[z]! - Math.min(ceil, nodes[z]!));
      held[z] = 0;
    }
  }
  for (let r = 1; r < rfCount.length; r++) {
    if (rfCount[r] === 0) continue;
    for (let z = 0; z < zones; z++) high[z] = high[z]! + rfCount[r]! * Math.min(Math.ceil(r / zones), nodes[z]!);
  }
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
