/**
 * Per-dimension bands: what an operator checks first, each node's replicas, owned partitions, disk bytes and
 * traffic near its capacity's share of the cluster's total. The weighted score ranks moves and brings the sum
 * inside its threshold; a sum can be right with the wrong composition (a node full of small partitions), so the
 * planner's results are measured against a band per dimension too. The planner does not yet choose its moves by
 * them (issue 18): these are the measure `rebalancer plan` and the planner benchmark report.
 */
import type { ClusterState, NodeState } from './state';

export const DIMENSIONS = ['replicas', 'owned', 'disk', 'traffic'] as const;
export type Dimension = (typeof DIMENSIONS)[number];
/** Half a band's width as a fraction of the node's share, per dimension. */
export type Bands = Record<Dimension, number>;

/**
 * Copies and bytes within 5% of the share; owner roles and traffic within 10%, as handoffs, which carry most of
 * them, close admission while they run.
 */
export const DEFAULT_BANDS: Bands = { replicas: 0.05, owned: 0.1, disk: 0.05, traffic: 0.1 };

/**
 * The least half width of a band: one copy's worth (one owner role for owned partitions), on the cluster's average. A band narrower than one of the items that move no placement can meet.
 */
function unit(st: ClusterState, d: Dimension): number {
  const per = (x: number, of: number): number => (of > 0 ? x / of : 0);
  const c = st.perCap;
  switch (d) {
    case 'replicas':
    case 'owned':
      return 1;
    case 'disk':
    case 'traffic':
      return per(c[d], c.replicas);
  }
}

/** A node's load in dimension d. */
export function loadOf(n: NodeState, d: Dimension): number {
  switch (d) {
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

export interface Band {
  load: number;
  /** The node's share of the cluster's total by capacity, and the band around it. */
  share: number;
  low: number;
  high: number;
}

/** Node n's band in dimension d (its share and the half width around it), from the cluster's total per capacity. */
export function bandOf(st: ClusterState, bands: Bands, n: NodeState, d: Dimension, load = loadOf(n, d)): Band {
  const share = st.perCap[d] * n.cap;
  const half = Math.max(bands[d] * share, unit(st, d));
  return { load, share, low: share - half, high: share + half };
}

/** How far a load lies outside its band, as a fraction of the share (0 inside): dimensions compare on one scale. */
export function excess(b: Band): number {
  if (b.share <= 0) return 0;
  return Math.max(0, b.load - b.high, b.low - b.load) / b.share;
}

/** The worst node of each dimension among the nodes that stay: the one furthest outside its band, else nearest its edge. */
export interface DimensionReport extends Band {
  dimension: Dimension;
  node: string;
  /** (load - share) / share: above 0 the node carries more than its share. */
  deviation: number;
  /** Half the band's width as a fraction of the share, its floor of one item included. */
  band: number;
  inside: boolean;
}

export function dimensionReport(st: ClusterState, bands: Bands): DimensionReport[] {
  const out: DimensionReport[] = [];
  for (const d of DIMENSIONS) {
    let worst: DimensionReport | null = null;
    for (const n of st.nodes) {
      if (!st.stays(n)) continue;
      const b = bandOf(st, bands, n, d);
      if (b.share <= 0) continue;
      const deviation = (b.load - b.share) / b.share;
      const band = (b.high - b.share) / b.share;
      const r: DimensionReport = { dimension: d, node: n.id, ...b, deviation, band, inside: excess(b) === 0 };
      if (worst === null || Math.abs(deviation) - band > Math.abs(worst.deviation) - worst.band) worst = r;
    }
    if (worst !== null) out.push(worst);
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

/** Parses `replicas=0.05,disk=0.05,owned=0.1,traffic=0.1` (any subset): the names and what each must be, on error. */
export function parseBands(text: string): { ok: true; bands: Partial<Bands> } | { ok: false; problem: string } {
  const out: Partial<Bands> = {};
  for (const pair of text.split(',')) {
    const [name, value, extra] = pair.split('=');
    if (!(DIMENSIONS as readonly string[]).includes(name ?? '') || value === undefined || extra !== undefined)
      return { ok: false, problem: `"${pair}": expected name=fraction pairs separated by commas, names among ${DIMENSIONS.join(', ')}, for example replicas=0.05,owned=0.1` };
    const v = Number(value);
    if (value.trim() === '' || !Number.isFinite(v)) return { ok: false, problem: `${name}=${value}: expected a fraction of the share, for example 0.05` };
    out[name as Dimension] = v;
  }
  return { ok: true, bands: out };
}

/** The first problem with a band setting in words, or null: a band of 0 (or below) would have nodes trade copies forever. */
export function bandsProblem(bands: Partial<Bands>): string | null {
  for (const d of DIMENSIONS) {
    const v = bands[d];
    if (v === undefined) continue;
    if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0 || v >= 1)
      return `bands.${d} is ${String(v)}: expected a fraction above 0 and below 1 (a band of 0 makes nodes trade copies back and forth)`;
  }
  return null;
}

