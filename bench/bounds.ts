/**
 * The lower bounds of the planner bench (docs/benchmarks.md, "planner"): pure functions over, for each node
 * outside a band, how much it must change in each dimension (`need`) and the copies it could take or give (one per
 * partition: its change in that dimension and its bytes at the cheapest source). A node's copies must meet all its
 * needs at once, so its bound is the largest of its dimensions'. Every bound ignores that one copy cannot serve two
 * nodes, so each is a lower bound for any plan.
 */
export interface Copy {
  delta: number;
  bytes: number;
}

/** One dimension of a node: how much it must change, and what each copy it could take or give changes. */
export interface NodeNeed {
  need: number;
  copies: Copy[];
}

/** A node's needs, one per dimension it lies outside, met by the same copies. */
export type NodeNeeds = NodeNeed[];

const EPS = 1e-12;

/** Copies that change the score at all; a node that cannot be fixed is assumed to take every one of them. */
const useful = (n: NodeNeed): Copy[] => n.copies.filter((c) => c.delta > EPS);

/** Fewest copies that cover every need of a node: the largest of its dimensions'. */
export function nodeMoves(dims: NodeNeeds): number {
  return Math.max(0, ...dims.map(fewestMoves));
}

/** Fewest copies that cover one need: the largest changes first. */
export function fewestMoves(n: NodeNeed): number {
  let moves = 0;
  let got = 0;
  for (const c of useful(n).sort((a, b) => b.delta - a.delta)) {
    if (got >= n.need - EPS) break;
    got += c.delta;
    moves++;
  }
  return moves;
}

/**
 * min Σ x·cost(c) over fractions x ∈ [0, 1] of copies with Σ x·delta ≥ need: every copy of negative cost in full,
 * then the cheapest per unit of score first.
 */
function knapsack(need: number, copies: Copy[], cost: (c: Copy) => number): number {
  let total = 0;
  let left = need;
  for (const c of [...copies].sort((a, b) => cost(a) / a.delta - cost(b) / b.delta)) {
    const k = cost(c);
    if (left <= EPS && k >= 0) break;
    const take = k < 0 ? 1 : Math.min(1, left / c.delta);
    total += take * k;
    left -= take * c.delta;
  }
  return total;
}

/**
 * For one node, a lower bound f(k) on the bytes of any k whole copies that cover its need, for k from the fewest
 * moves up to every copy. Pricing the count with μ (any sign): k copies covering the need cost at least
 * K(μ) - μ·k, K(μ) the fractional knapsack with each copy costing bytes + μ (μ > 0 relaxes "at most k copies",
 * μ < 0 "at least k"). So f(k) = max over μ of K(μ) - μ·k, valid at every μ (a grid of them here, μ = 0 included),
 * and a maximum of lines in k: convex, so each extra copy saves no more bytes than the one before.
 */
function bytesByMoves(n: NodeNeed): { kmin: number; kmax: number; f: (k: number) => number } {
  const copies = useful(n);
  const scale = copies.reduce((a, c) => a + c.bytes, 0) / Math.max(1, copies.length);
  const steps = Array.from({ length: 321 }, (_, j) => scale * 2 ** ((j - 160) / 8));
  const lines = [0, ...steps, ...steps.map((x) => -x)].map((mu) => ({ mu, at0: knapsack(n.need, copies, (c) => c.bytes + mu) }));
  const kmin = fewestMoves(n);
  const kmax = Math.max(kmin, copies.length);
  return { kmin, kmax, f: (k) => Math.max(0, ...lines.map((l) => l.at0 - l.mu * k)) };
}

/**
 * A node's bound on the bytes of k whole copies meeting all its needs: the largest of its dimensions' f(k), from
 * the most of their fewest moves up to every copy. A maximum of convex functions, so convex too.
 */
function nodeCurve(dims: NodeNeeds): { kmin: number; kmax: number; f: (k: number) => number } {
  const cs = dims.map(bytesByMoves);
  const kmin = Math.max(0, ...cs.map((c) => c.kmin));
  return { kmin, kmax: Math.max(kmin, ...cs.map((c) => c.kmax)), f: (k) => Math.max(0, ...cs.map((c) => c.f(k))) };
}

/**
 * Fewest bytes that meet a node's needs with whole copies: the least f(k) over the counts k a plan can have. At
 * μ = 0 it is the fractional knapsack by bytes per unit of change; the other prices make it whole copies' worth (a
 * node that needs 66.7 copies of equal change takes 67, not two-thirds of the last).
 */
export function fewestBytes(dims: NodeNeeds): number {
  const c = nodeCurve(dims);
  let best = c.f(c.kmin);
  for (let k = c.kmin + 1; k <= c.kmax; k++) {
    const b = c.f(k);
    if (b >= best) break;
    best = b;
  }
  return best;
}

interface Curve {
  kmin: number;
  kmax: number;
  f: (k: number) => number;
  k: number;
}

function curves(nodes: NodeNeeds[]): Curve[] {
  return nodes.map((n) => {
    const c = nodeCurve(n);
    return { ...c, k: c.kmin };
  });
}

/** The node whose next copy saves the most bytes (each node's savings only fall: the curves are convex). */
function bestStep(cs: Curve[]): { c: Curve; saves: number } | undefined {
  let best: { c: Curve; saves: number } | undefined;
  for (const c of cs) {
    if (c.k >= c.kmax) continue;
    const saves = c.f(c.k) - c.f(c.k + 1);
    if (best === undefined || saves > best.saves) best = { c, saves };
  }
  return best;
}

/**
 * The joint bound: fewest moves of any plan moving at most `bytesCap` bytes. Relaxed to whole copy counts k per
 * node with bytes f(k) (bytesByMoves): starting from each node's fewest moves, the next copy goes where it saves the
 * most bytes, until the bytes fit; exact for the relaxation because every step costs one move and the savings
 * only fall along each node. Infinity when no plan fits.
 */
export function fewestMovesWithinBytes(nodes: NodeNeeds[], bytesCap: number): number {
  const cs = curves(nodes);
  let moves = cs.reduce((a, c) => a + c.k, 0);
  let bytes = cs.reduce((a, c) => a + c.f(c.k), 0);
  const cap = bytesCap * (1 + 1e-9);
  while (bytes > cap) {
    const s = bestStep(cs);
    if (s === undefined || s.saves <= 0) return Infinity;
    s.c.k++;
    bytes -= s.saves;
    moves++;
  }
  return moves;
}

/** The mirror: fewest bytes of any plan with at most `movesCap` moves (the same relaxation). Infinity when none. */
export function fewestBytesWithinMoves(nodes: NodeNeeds[], movesCap: number): number {
  const cs = curves(nodes);
  let spare = movesCap - cs.reduce((a, c) => a + c.k, 0);
  if (spare < 0) return Infinity;
  for (let s = bestStep(cs); spare > 0 && s !== undefined && s.saves > 0; s = bestStep(cs), spare--) s.c.k++;
  return cs.reduce((a, c) => a + c.f(c.k), 0);
}
