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
 * A node's bound on the bytes of k whole copies meeting all its needs, from its fewest moves up to every copy: at
 * each k the larger of its dimensions' f(k) and the whole-copy search's (`wholeCopies`), then the lower convex
 * envelope of those points, still below each and convex, so each extra copy saves no more bytes than the one before.
 */
function nodeCurve(dims: NodeNeeds): { kmin: number; kmax: number; f: (k: number) => number } {
  const cs = dims.map(bytesByMoves);
  const kmin = Math.max(0, ...cs.map((c) => c.kmin));
  const kmax = Math.max(kmin, ...cs.map((c) => c.kmax));
  const whole = wholeCopies(dims, Math.min(kmax, Math.ceil(1.25 * kmin) + 2));
  const g = (k: number): number => Math.max(0, ...cs.map((c) => c.f(k)), whole?.[k] ?? 0);
  // Andrew's lower hull over the points (k, g(k)).
  const hull: [number, number][] = [];
  for (let k = kmin; k <= kmax; k++) {
    const p: [number, number] = [k, g(k)];
    while (hull.length >= 2) {
      const [a, b] = [hull[hull.length - 2]!, hull[hull.length - 1]!];
      if ((b[0] - a[0]) * (p[1] - a[1]) - (b[1] - a[1]) * (p[0] - a[0]) > 0) break;
      hull.pop();
    }
    hull.push(p);
  }
  const at = new Float64Array(kmax - kmin + 1);
  for (let h = 0; h + 1 < hull.length; h++) {
    const [[x0, y0], [x1, y1]] = [hull[h]!, hull[h + 1]!];
    for (let k = x0; k <= x1; k++) at[k - kmin] = y0 + ((y1 - y0) * (k - x0)) / (x1 - x0);
  }
  if (hull.length === 1) at[0] = hull[0]![1];
  return { kmin, kmax, f: (k) => at[Math.min(kmax, Math.max(kmin, k)) - kmin]! };
}

/** Grid cells times copies the whole-copy search may visit per node. */
const WHOLE_COPY_WORK = 3e7;

/**
 * For k from 0 to `kcap`, the fewest bytes of at most k whole copies meeting every need of a node (Infinity where
 * none do), by dynamic programming over its copies; null when it has two dimensions whose copies change them
 * unequally. A dimension whose copies all change it alike is a count. The other is measured on a grid, each copy's
 * change rounded up to the next step, so every set that meets the needs meets them on the grid too and each figure
 * stays a lower bound. Where few sizes of copy exist it is well above the fractional bound: a node short of 52
 * copies and 197 MB, among copies of 41 MB and of 2 MB, takes 3 large ones and 49 small ones at 52 moves (223 MB);
 * the fraction prices 2.3 large ones. Where sizes are many, the grid's rounding loosens it and the fractional bound
 * is near exact: `nodeCurve` takes the larger.
 */
export function wholeCopies(dims: NodeNeeds, kcap: number): Float64Array | null {
  const n = dims[0]?.copies.length ?? 0;
  if (n === 0 || dims.some((d) => d.copies.length !== n)) return null;
  const count = (d: NodeNeed): number | null => {
    const first = d.copies[0]!.delta;
    return first > EPS && d.copies.every((c) => Math.abs(c.delta - first) <= EPS * Math.max(1, first)) ? Math.max(0, Math.ceil(d.need / first - 1e-9)) : null;
  };
  const counts = dims.map(count);
  const gridded = dims.filter((_, j) => counts[j] === null);
  if (gridded.length > 1) return null;
  const least = Math.max(0, ...counts.map((c) => c ?? 0));
  const cap = Math.min(n, kcap);
  const d = gridded[0];
  const units = d === undefined || d.need <= EPS ? 0 : Math.max(50, Math.min(4000, Math.floor(WHOLE_COPY_WORK / (n * (cap + 1)))));
  const step = units > 0 ? d!.need / units : 1;
  const width = units + 1;
  // dp[c * width + u]: fewest bytes of c copies meeting u grid steps of the gridded need (capped at the need).
  const dp = new Float64Array((cap + 1) * width).fill(Infinity);
  dp[0] = 0;
  for (let i = 0; i < n; i++) {
    const u = units > 0 ? Math.min(units, Math.ceil(d!.copies[i]!.delta / step - 1e-9)) : 0;
    const cost = dims[0]!.copies[i]!.bytes;
    // Each copy once: from the most copies down, so a state this copy wrote is not read again for it.
    for (let c = cap - 1; c >= 0; c--) {
      for (let x = units; x >= 0; x--) {
        const v = dp[c * width + x]!;
        if (v === Infinity) continue;
        const k = (c + 1) * width + Math.min(units, x + u);
        if (v + cost < dp[k]!) dp[k] = v + cost;
      }
    }
  }
  const out = new Float64Array(cap + 1).fill(Infinity);
  let best = Infinity;
  for (let c = 0; c <= cap; c++) {
    if (c >= least) best = Math.min(best, dp[c * width + units]!);
    out[c] = best;
  }
  return out;
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
