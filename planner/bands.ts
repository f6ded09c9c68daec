/**
 * Per-dimension bands: what an operator checks first, each node's replicas, owned partitions, disk bytes and
 * traffic near its capacity's share of the cluster's total. The weighted score ranks moves and brings the sum
 * inside its threshold; a sum can be right with the wrong composition (a node full of small partitions), so a plan
 * is done only when every node is inside every band too, or no move the rules allow brings it closer.
 */
import type { ClusterState, NodeState } from './state';
import { DIMENSIONS, type Band, type Bands, type Dimension, type DimensionReport, type GuardDimension, type NodeBand } from './types';

/**
 * The least half width of a band: one item of the dimension, the largest (one copy, one owner role, the largest
 * partition's bytes or traffic). A band narrower than that no placement can meet when that item decides: a node
 * holding one hot partition more than another differs by all its traffic, and chasing it would move copies forever.
 */
function unit(st: ClusterState, d: Dimension | GuardDimension): number {
  switch (d) {
    case 'replicas':
    case 'owned':
      return 1;
    case 'disk':
      return st.maxBytes;
    case 'traffic':
      return st.maxPub + st.maxDel;
    case 'publishes':
      return st.maxPub;
    case 'deliveries':
      return st.maxDel;
  }
}

/** A node's load in dimension d. */
export function loadOf(n: NodeState, d: Dimension | GuardDimension): number {
  switch (d) {
    case 'publishes':
      return n.traffic - n.deliveries;
    case 'deliveries':
      return n.deliveries;
    case 'replicas':
      return n.owned + n.followed;
    case 'owned':
      return n.owned;
    case 'disk':
      return n.bytes;
    case 'traffic':
      return n.traffic;
  }
}

/** The band setting a dimension is held to: the traffic band holds each of its two parts too. */
function setting(bands: Bands, d: Dimension | GuardDimension): number {
  return bands[d === 'publishes' || d === 'deliveries' ? 'traffic' : d];
}

/**
 * Which capacity dimension d's share counts: what copies carry goes by the node's zone's share of them
 * (`NodeState.capCopy`), traffic by its two parts together, owner roles and deliveries by plain capacity.
 */
const CAP_OF: Record<Dimension | GuardDimension, 'capCopy' | 'cap' | 'capTraffic'> = {
  replicas: 'capCopy',
  disk: 'capCopy',
  publishes: 'capCopy',
  traffic: 'capTraffic',
  owned: 'cap',
  deliveries: 'cap',
};

/** Node n's band in dimension d (its share and the half width around it), from the cluster's total per capacity. */
export function bandOf(st: ClusterState, bands: Bands, n: NodeState, d: Dimension | GuardDimension, load = loadOf(n, d)): Band {
  const share = st.perCap[d] * n[CAP_OF[d]];
  const half = Math.max(setting(bands, d) * share, unit(st, d));
  return { load, share, low: share - half, high: share + half };
}

/**
 * How far `load` lies outside the band `share` ± `half`, as a fraction of the share (0 inside, and where there is
 * no share): dimensions compare on one scale.
 */
function outside(load: number, share: number, half: number): number {
  return share <= 0 ? 0 : Math.max(0, load - share - half, share - half - load) / share;
}

export function excess(b: Band): number {
  return outside(b.load, b.share, b.high - b.share);
}

/** The dimensions a follower copy moves, as the band step weighs and names them. */
export const MOVED = ['replicas', 'disk', 'publishes'] as const;

/** Dimensions by index in `BandMeter`: the four the bands are set for, then the two parts of traffic. */
const ALL: readonly (Dimension | GuardDimension)[] = [...DIMENSIONS, 'publishes', 'deliveries'];
const [REPLICAS, OWNED, DISK, TRAFFIC, PUBLISHES, DELIVERIES] = [0, 1, 2, 3, 4, 5];
/** `CAP_OF` by index, as 0 (cap), 1 (capCopy), 2 (capTraffic): a node's capacity is then read by name, not by a key. */
const CAP_KIND = Int8Array.from(ALL, (d) => ['cap', 'capCopy', 'capTraffic'].indexOf(CAP_OF[d]));
/** The dimensions a follower copy moves, by index, as operators see them (traffic whole). */
const COPY_DIMENSIONS = [REPLICAS, DISK, TRAFFIC] as const;

/**
 * The bands of one planning pass as numbers, for the inner loops of the search: per dimension its share per
 * capacity, half width as a fraction and floor, so judging a step costs a few multiplications and allocates nothing.
 */
export class BandMeter {
  private readonly share = new Float64Array(ALL.length);
  private readonly frac = new Float64Array(ALL.length);
  private readonly floor = new Float64Array(ALL.length);
  /**
   * Per node, the copy it should take (`lack`) and give (`surplus`), as bytes and publishes at indexes 2n and 2n + 1,
   * kept up to date by `note` as steps change nodes: the search weighs a copy with four multiplications.
   */
  private readonly lack: Float64Array;
  private readonly surplus: Float64Array;
  /** The same to the nearer edge of each band rather than the share: the copy the band step should move. */
  private readonly bandLack: Float64Array;
  private readonly bandSurplus: Float64Array;
  /** The average copy's bytes and publishes: the unit a copy's misfit is measured in. */
  private readonly avgBytes: number;
  private readonly avgPub: number;

  constructor(
    private readonly st: ClusterState,
    readonly bands: Bands,
  ) {
    this.lack = new Float64Array(2 * st.nodes.length);
    this.avgBytes = st.perCap.replicas > 0 ? st.perCap.disk / st.perCap.replicas : 0;
    this.avgPub = st.perCap.replicas > 0 ? st.perCap.publishes / st.perCap.replicas : 0;
    this.surplus = new Float64Array(2 * st.nodes.length);
    this.bandLack = new Float64Array(2 * st.nodes.length);
    this.bandSurplus = new Float64Array(2 * st.nodes.length);
    ALL.forEach((d, i) => {
      this.share[i] = st.perCap[d];
      this.frac[i] = setting(bands, d);
      this.floor[i] = unit(st, d);
    });
  }

  /** Node n's share in dimension i. */
  private shareOf(n: NodeState, i: number): number {
    const kind = CAP_KIND[i]!;
    return this.share[i]! * (kind === 0 ? n.cap : kind === 1 ? n.capCopy : n.capTraffic);
  }

  /** How far load x of node n lies outside its band in dimension i, as a fraction of its share (0 inside). */
  private excess(n: NodeState, i: number, x: number): number {
    const share = this.shareOf(n, i);
    return outside(x, share, Math.max(this.frac[i]! * share, this.floor[i]!));
  }

  /** (x - share)² / share² of node n in dimension i: squared, so a step nearer every share beats one overshooting one. */
  private dist(n: NodeState, i: number, x: number): number {
    const share = this.shareOf(n, i);
    if (share <= 0) return 0;
    const dev = (x - share) / share;
    return dev * dev;
  }

  /**
   * Whether `amount` of dimension i going from node s to node r keeps the bands: r goes no further outside its band
   * (a receiver is never filled past its share's band, as the score would fill a node that owns little), and s only
   * as far as r comes in (where both cannot be inside, as when a zone leaves two nodes to share what it must hold).
   */
  private keeps(i: number, s: NodeState, sNow: number, r: NodeState, rNow: number, amount: number): boolean {
    const rBefore = this.excess(r, i, rNow);
    const rAfter = this.excess(r, i, rNow + amount);
    return rAfter <= rBefore + 1e-12 && this.excess(s, i, sNow - amount) + rAfter <= this.excess(s, i, sNow) + rBefore + 1e-12;
  }

  /** Summed excess over the dimensions a follower copy moves, with `sign` copies of p added (0: as it is). */
  copyExcess(n: NodeState, p = -1, sign: -1 | 0 | 1 = 0): number {
    const st = this.st;
    const k = sign === 0 ? 0 : sign;
    return (
      this.excess(n, REPLICAS, n.owned + n.followed + k) +
      this.excess(n, DISK, n.bytes + (k === 0 ? 0 : k * st.bytes[p]!)) +
      this.excess(n, TRAFFIC, this.trafficAfterHandoffs(n, n.traffic + (k === 0 ? 0 : k * st.pub[p]!)))
    );
  }

  /**
   * Node n's traffic `load` as the band step judges it: the deliveries it lacks or has beyond its share are left to
   * the owner handoffs, which move them, as far as its band's edge (a node inside its traffic band stays inside). A
   * node that owns nothing yet has little traffic, and copies sent to make up its deliveries would overfill it.
   */
  private trafficAfterHandoffs(n: NodeState, load: number): number {
    const gap = this.shareOf(n, DELIVERIES) - n.deliveries;
    const share = this.shareOf(n, TRAFFIC);
    const half = Math.max(this.frac[TRAFFIC]! * share, this.floor[TRAFFIC]!);
    return gap > 0 ? Math.min(load + gap, Math.max(load, share + half)) : Math.max(load + gap, Math.min(load, share - half));
  }

  /** The band guard of a follower copy of p moving from s to r, in copies, bytes and publishes (see `keeps`). */
  copyKeeps(p: number, s: NodeState, r: NodeState): boolean {
    const st = this.st;
    return (
      this.keeps(REPLICAS, s, s.owned + s.followed, r, r.owned + r.followed, 1) &&
      this.keeps(DISK, s, s.bytes, r, r.bytes, st.bytes[p]!) &&
      this.keeps(PUBLISHES, s, s.traffic - s.deliveries, r, r.traffic - r.deliveries, st.pub[p]!)
    );
  }

  /** A copy leaving s takes it below its replica share. */
  belowReplicaShareWithout(s: NodeState): boolean {
    return s.owned + s.followed - 1 < this.shareOf(s, REPLICAS);
  }

  /** A copy leaving s takes it further below its replica band. */
  belowReplicaBandWithout(s: NodeState): boolean {
    const load = s.owned + s.followed;
    return this.excess(s, REPLICAS, load - 1) > this.excess(s, REPLICAS, load);
  }

  /** Some node that stays could give a copy and still hold its replica share. */
  anyAboveReplicaShare(): boolean {
    return this.st.nodes.some((n) => this.st.stays(n) && n.owned + n.followed - 1 >= this.shareOf(n, REPLICAS));
  }

  /** Some node that stays holds more copies than its replica band allows. */
  anyAboveReplicaBand(): boolean {
    return this.st.nodes.some((n) => this.st.stays(n) && n.owned + n.followed > this.shareOf(n, REPLICAS) && this.excess(n, REPLICAS, n.owned + n.followed) > 0);
  }

  /** Node n owns fewer partitions than its owned band allows. */
  ownsTooFew(n: NodeState): boolean {
    return n.owned < this.shareOf(n, OWNED) && this.excess(n, OWNED, n.owned) > 0;
  }

  /** Node n's owned partitions or traffic lie outside their band: only then can a handoff with it lower the excess (`roleExcessFalls`). */
  outsideRoleBands(n: NodeState): boolean {
    return this.excess(n, OWNED, n.owned) > 0 || this.excess(n, TRAFFIC, n.traffic) > 0;
  }

  /** Handing p's owner role from s to d lowers their summed excess outside the owned and traffic bands. */
  roleExcessFalls(p: number, s: NodeState, d: NodeState): boolean {
    const del = this.st.del[p]!;
    const after = this.excess(s, OWNED, s.owned - 1) + this.excess(d, OWNED, d.owned + 1) + this.excess(s, TRAFFIC, s.traffic - del) + this.excess(d, TRAFFIC, d.traffic + del);
    const before = this.excess(s, OWNED, s.owned) + this.excess(d, OWNED, d.owned) + this.excess(s, TRAFFIC, s.traffic) + this.excess(d, TRAFFIC, d.traffic);
    return after < before - 1e-12;
  }

  /** The band guard of p's owner role handed from s to d, each keeping its copy: owned and deliveries. */
  roleKeeps(p: number, s: NodeState, d: NodeState): boolean {
    return this.keeps(OWNED, s, s.owned, d, d.owned, 1) && this.keeps(TRAFFIC, s, s.traffic, d, d.traffic, this.st.del[p]!);
  }


  /**
   * How well a follower copy of p fits what s has too much of and r too little, 0 at best: each node's gap to its
   * shares in bytes and publishes, spread over the copies it has to give or take (at least one), is the copy it
   * should move; the squared difference from it, in average copies, is the misfit. A receiver so fills with copies
   * of the make-up it lacks and reaches every share together, where the most bytes or publishes per copy first (or
   * the fewest bytes per unit of score) would fill one dimension to its edge with the others short.
   */
  copyFit(p: number, s: NodeState, r: NodeState): number {
    return this.fit(p, s, r, this.lack, this.surplus);
  }

  /**
   * `copyFit` against the bands' edges: each node's gap to the edge of its bands in bytes and publishes, spread over
   * the copies it lacks to its replica band's edge (at least one), is the copy it should move. A node short of
   * copies and of bytes so takes copies that bring both to their edges together, where the fewest bytes per unit of
   * excess first would take the smallest copies up to the count and then the largest to make up the bytes.
   */
  bandFit(p: number, s: NodeState, r: NodeState): number {
    return this.fit(p, s, r, this.bandLack, this.bandSurplus);
  }

  /** The best band fit a copy of p leaving s can have, whatever node takes it: the band step skips copies that cannot win. */
  bandSourceFit(p: number, s: NodeState): number {
    return this.bestFit(p, s, this.bandSurplus);
  }

  /** The best fit a copy of p leaving s can have, whatever node takes it: the search skips copies that cannot win. */
  sourceFit(p: number, s: NodeState): number {
    return this.bestFit(p, s, this.surplus);
  }

  private fit(p: number, s: NodeState, r: NodeState, lack: Float64Array, surplus: Float64Array): number {
    // A retained copy fits whatever its make-up: it costs only what it lacks, and the guard keeps r inside its bands.
    if (this.st.retainedAt(p)?.has(r.index)) return 0;
    return -(this.misfit(p, r.index, lack) + this.misfit(p, s.index, surplus));
  }

  /** `fit`'s bound over every receiver: the source's side alone, or 0 where some node holds a retained copy. */
  private bestFit(p: number, s: NodeState, surplus: Float64Array): number {
    return this.st.retainedAt(p) === undefined ? -this.misfit(p, s.index, surplus) : 0;
  }

  /** Node n changed: the copies it should take and give, from its gaps to its shares spread over the copies (at least one). */
  note(n: NodeState): void {
    // Plain calls, no loop over small arrays or closures: this runs for both nodes of every proposal.
    this.noteSide(n, this.lack, 1, false);
    this.noteSide(n, this.surplus, -1, false);
    this.noteSide(n, this.bandLack, 1, true);
    this.noteSide(n, this.bandSurplus, -1, true);
  }

  private noteSide(n: NodeState, out: Float64Array, sign: 1 | -1, edge: boolean): void {
    const copies = Math.max(1, this.gap(n, REPLICAS, n.owned + n.followed, sign, edge));
    out[2 * n.index] = this.gap(n, DISK, n.bytes, sign, edge) / copies;
    out[2 * n.index + 1] = this.gap(n, PUBLISHES, n.traffic - n.deliveries, sign, edge) / copies;
  }

  /** Summed over the dimensions a copy moves, how far node n is below (sign 1) or above (-1) its shares, in shares. */
  beyond(n: NodeState, sign: 1 | -1): number {
    let sum = 0;
    for (const i of COPY_DIMENSIONS) {
      const share = this.shareOf(n, i);
      if (share > 0) sum += this.gap(n, i, i === REPLICAS ? n.owned + n.followed : i === DISK ? n.bytes : n.traffic, sign) / share;
    }
    return sum;
  }

  /**
   * The gap of node n to its share in dimension i (or to its band's edge on that side, `edge`), on the side `sign`
   * (1: what it lacks, -1: what it has too much).
   */
  private gap(n: NodeState, i: number, load: number, sign: 1 | -1, edge = false): number {
    const share = this.shareOf(n, i);
    const half = edge ? Math.max(this.frac[i]! * share, this.floor[i]!) : 0;
    return Math.max(0, sign * (share - sign * half - load));
  }

  /** See `copyFit`: how far p's copy is from the copy node n should move, in average copies, squared. */
  private misfit(p: number, n: number, target: Float64Array): number {
    const { avgBytes, avgPub } = this;
    const b = avgBytes > 0 ? (this.st.bytes[p]! - target[2 * n]!) / avgBytes : 0;
    const q = avgPub > 0 ? (this.st.pub[p]! - target[2 * n + 1]!) / avgPub : 0;
    return b * b + q * q;
  }

  /** How much nearer their shares in owner roles and deliveries handing p's owner role from s to d brings the pair. */
  roleNearer(p: number, s: NodeState, d: NodeState): number {
    const del = this.st.del[p]!;
    return this.roleDist(s, 0, del) + this.roleDist(d, 0, del) - this.roleDist(s, -1, del) - this.roleDist(d, 1, del);
  }

  /** Node n's distance to its shares in owner roles and deliveries with k owner roles of `del` deliveries added. */
  private roleDist(n: NodeState, k: number, del: number): number {
    return this.dist(n, OWNED, n.owned + k) + this.dist(n, DELIVERIES, n.deliveries + k * del);
  }
}

/** Node n's load against its band in each dimension. */
export function nodeBands(st: ClusterState, bands: Bands, n: NodeState): Record<Dimension, NodeBand> {
  const out = {} as Record<Dimension, NodeBand>;
  for (const d of DIMENSIONS) out[d] = nodeBand(st, bands, n, d);
  return out;
}

function nodeBand(st: ClusterState, bands: Bands, n: NodeState, d: Dimension | GuardDimension): NodeBand {
  const b = bandOf(st, bands, n, d);
  return { ...b, inside: excess(b) === 0 };
}

/** A load's deviation from its share in words ("+14%", "-31%"), or null without a share. */
export function shareDeviation(b: Band): string | null {
  return b.share > 0 ? `${b.load >= b.share ? '+' : ''}${(((b.load - b.share) / b.share) * 100).toFixed(0)}%` : null;
}

/**
 * Each dimension's worst node. Weighed as numbers, the report built only for the worst: an object per node and
 * dimension was 12 ms of a 45 ms tick at 1,000 nodes.
 */
export function dimensionReport(st: ClusterState, bands: Bands): DimensionReport[] {
  const out: DimensionReport[] = [];
  for (const d of DIMENSIONS) {
    const floor = unit(st, d);
    const frac = setting(bands, d);
    let worst: NodeState | null = null;
    let worstBy = 0;
    for (const n of st.nodes) {
      if (!st.stays(n)) continue;
      const share = st.perCap[d] * n[CAP_OF[d]];
      if (share <= 0) continue;
      const half = Math.max(frac * share, floor);
      // How far outside its band the node is, as a fraction of its share (negative inside: how near the edge).
      const by = Math.abs((loadOf(n, d) - share) / share) - (share + half - share) / share;
      if (worst === null || by > worstBy) [worst, worstBy] = [n, by];
    }
    if (worst === null) continue;
    const b = nodeBand(st, bands, worst, d);
    out.push({ dimension: d, node: worst.id, ...b, deviation: (b.load - b.share) / b.share, band: (b.high - b.share) / b.share });
  }
  return out;
}

/** A dimension's band in words: "n7 holds 154 replicas, above its band 128.3-141.8 (share 135.0 ± 5.0%)". */
export function bandWords(r: DimensionReport): string {
  const f = (x: number): string => (r.dimension === 'disk' ? `${(x / 2 ** 20).toFixed(0)} MiB` : x.toFixed(Math.abs(x) >= 100 ? 0 : 1));
  const unit = r.dimension === 'disk' ? ' on disk' : r.dimension === 'traffic' ? ' msg/s of traffic' : r.dimension === 'owned' ? ' owned partitions' : ' replicas';
  const side = r.load > r.high ? 'above' : r.load < r.low ? 'below' : 'inside';
  return `${r.node} holds ${f(r.load)}${unit}, ${side} its band ${f(r.low)} to ${f(r.high)} (share ${f(r.share)} ± ${(r.band * 100).toFixed(1)}%)`;
}
