/**
 * The planner's rules as properties over random clusters (fast-check). Each property is also run against a
 * mutant, the planner with that one rule taken out (a method of TickPlanner or ClusterState replaced from this
 * file), and must fail there: a property that cannot fail guards nothing.
 */
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Node, Partition, Topology } from '../../cluster/contract';
import { DEFAULT_PLANNER_CONFIG, dimensionBands, planNow, planToConvergence, type InFlightMove, type Plan, type PlanInput, type PlannerConfig } from '../../planner';
import { movesOnce } from '../../planner/net';
import { TickPlanner } from '../../planner/tick';
import { ClusterState, type NodeState } from '../../planner/state';
import { applySteps, carriedOut, input, node, partition, ring, topology, type LoadedPartition } from './planner-topology';

const RUNS = 150;

interface Case {
  input: PlanInput;
  config: PlannerConfig;
}

const busyKinds = ['learner', 'leaving', 'closed', 'suspended', 'stream'] as const;

interface Options {
  /** Probability weight of a busy partition, a dead/draining node, a cooldown, a move in flight. */
  noise: boolean;
  zones: boolean;
}

/** `arb` once in `1 + none` cases, null otherwise. */
function sometimes<T>(arb: fc.Arbitrary<T>, none: number): fc.Arbitrary<T | null> {
  return fc.oneof({ arbitrary: fc.constant(null), weight: none }, { arbitrary: arb, weight: 1 });
}

function arbCase(o: Options): fc.Arbitrary<Case> {
  return fc
    .record({
      n: fc.integer({ min: 3, max: 9 }),
      zones: o.zones ? fc.integer({ min: 1, max: 3 }) : fc.constant(1),
      caps: fc.array(fc.constantFrom(1, 1, 2, 3), { minLength: 9, maxLength: 9 }),
      empty: fc.integer({ min: 0, max: 3 }),
      parts: fc.array(
        fc.record({
          seeds: fc.array(fc.nat(), { minLength: 3, maxLength: 3 }),
          rf: fc.integer({ min: 1, max: 3 }),
          bytes: fc.integer({ min: 1000, max: 300_000_000 }),
          pub: fc.integer({ min: 0, max: 100 }),
          del: fc.integer({ min: 0, max: 100 }),
          busy: o.noise ? sometimes(fc.constantFrom(...busyKinds), 6) : fc.constant(null),
          retained: sometimes(fc.nat(), 3),
        }),
        { minLength: 5, maxLength: 60 },
      ),
      recovery: o.noise ? sometimes(fc.nat(), 4) : fc.constant(null),
      dead: o.noise ? sometimes(fc.nat(), 3) : fc.constant(null),
      draining: o.noise ? sometimes(fc.nat(), 3) : fc.constant(null),
      inFlight: o.noise ? fc.array(fc.tuple(fc.nat(), fc.nat(), fc.integer({ min: 0, max: 1e8 })), { maxLength: 6 }) : fc.constant([]),
      coolNodes: o.noise ? fc.array(fc.nat(), { maxLength: 3 }) : fc.constant<number[]>([]),
      coolParts: o.noise ? fc.array(fc.nat(), { maxLength: 6 }) : fc.constant<number[]>([]),
      threshold: fc.constantFrom(0.05, 0.1, 0.2, 0.4),
      minImprovement: fc.constantFrom(0.0005, 0.002, 0.01),
      perNode: fc.integer({ min: 1, max: 3 }),
      cluster: fc.integer({ min: 1, max: 12 }),
    })
    .map((r) => {
      const nodes: Node[] = Array.from({ length: r.n }, (_, i) => node(`n${i}`, { capacity: r.caps[i]!, zone: `z${i % r.zones}` }));
      // The last `empty` nodes start empty (joined); the others hold the copies.
      const holders = Math.max(1, r.n - r.empty);
      const parts: Partition[] = r.parts.map((q, i) => {
        const picked: string[] = [];
        for (let k = 0; picked.length < Math.min(q.rf, holders) && k < 3 * holders; k++) {
          const id = `n${(q.seeds[k % 3]! + k) % holders}`;
          if (!picked.includes(id)) picked.push(id);
        }
        const p = partition(`q-${i}`, picked[0]!, picked.slice(1), { historyBytes: q.bytes, publishRate: q.pub, deliveryRate: q.del });
        if (q.retained !== null) {
          const on = `n${q.retained % r.n}`;
          if (!picked.includes(on)) p.retainedCopies = [{ node: on, durableOffset: 0, removedAt: 0, retainedUntil: 1e12, bytesToCatchUp: q.bytes >> 3 }];
        }
        const other = nodes.find((n) => !picked.includes(n.id))?.id;
        if (q.busy === 'learner' && other) p.learners = [other];
        if (q.busy === 'leaving' && other) p.leaving = other;
        if (q.busy === 'closed') p.admission = 'closed';
        if (q.busy === 'stream') p.kind = 'stream';
        if (q.busy === 'suspended' && p.followers.length > 0) p.history.find((h) => h.node === p.followers[0])!.suspended = true;
        return p;
      });
      if (r.recovery !== null) {
        const p = parts[r.recovery % parts.length]!;
        p.pendingRecovery = { epoch: 1, openedAt: 0, reason: 'owner lost', failedOwner: p.owner };
      }
      if (r.dead !== null) nodes[r.dead % r.n]!.live = false;
      if (r.draining !== null) nodes[r.draining % r.n]!.draining = true;
      const inFlight: InFlightMove[] = [];
      for (const [pi, to, bytes] of r.inFlight) {
        const p = parts[pi % parts.length]!;
        if (inFlight.some((m) => m.partition === p.id) || p.followers.length === 0) continue;
        const target = nodes[to % r.n]!.id;
        if ([p.owner, ...p.followers, ...p.learners].includes(target)) continue;
        p.learners = [target];
        inFlight.push({ partition: p.id, op: 'follower_move', from: p.followers[0]!, to: target, bytesRemaining: bytes });
      }
      const t: Topology = topology(nodes, parts);
      const cooldowns = {
        nodes: Object.fromEntries(r.coolNodes.map((i) => [`n${i % r.n}`, 1000])),
        partitions: Object.fromEntries(r.coolParts.map((i) => [`q-${i % parts.length}`, 1000])),
      };
      const config: PlannerConfig = {
        ...DEFAULT_PLANNER_CONFIG,
        threshold: r.threshold,
        minImprovement: r.minImprovement,
        maxTransfersPerNode: r.perNode,
        maxTransfersPerCluster: r.cluster,
      };
      return { input: { topology: t, inFlight, cooldowns, now: 0 }, config };
    });
}

const noisy = arbCase({ noise: true, zones: true });

/** Pairs of copies of one partition in one zone. */
function sameZonePairs(copies: string[], zone: Map<string, string>): number {
  let pairs = 0;
  for (let i = 0; i < copies.length; i++) for (let j = i + 1; j < copies.length; j++) if (zone.get(copies[i]!) === zone.get(copies[j]!)) pairs++;
  return pairs;
}

/** Every hard rule one tick must keep; returns the first one broken, in words. */
function tickViolation({ input, config }: Case, plan: Plan): string | null {
  const t = input.topology;
  const nodes = new Map(t.nodes.map((n) => [n.id, n]));
  const parts = new Map(t.partitions.map((p) => [p.id, p]));
  if (plan.steps.length > 0 && t.partitions.some((p) => p.pendingRecovery !== null)) return 'a proposal while a recovery is pending';
  if (plan.steps.length > 0 && input.inFlight.length + plan.steps.length > config.maxTransfersPerCluster) return 'cluster limit exceeded';
  const inbound = new Map<string, number>();
  for (const m of input.inFlight) inbound.set(m.to, (inbound.get(m.to) ?? 0) + 1);
  const zone = new Map(t.nodes.map((n) => [n.id, n.zone]));
  const seen = new Set<string>();
  for (const s of plan.steps) {
    const p = parts.get(s.partition)!;
    if (seen.has(s.partition)) return `${s.partition} proposed twice in one tick`;
    seen.add(s.partition);
    if ((input.cooldowns.partitions[s.partition] ?? 0) > input.now) return `${s.partition} is cooling down`;
    const from = nodes.get(s.from)!;
    // A cooling node sheds no copy; its owner roles may go (a handoff sends back nothing it received).
    if (!from.draining && s.op !== 'owner_handoff' && (input.cooldowns.nodes[s.from] ?? 0) > input.now) return `${s.from} is cooling down`;
    const to = nodes.get(s.to)!;
    if (!to.live || to.draining) return `${s.to} is dead or draining`;
    // A suspended copy on a down node cannot rejoin until its node returns, so it holds nothing up.
    const rejoining = (h: { node: string; suspended: boolean }) => h.suspended && nodes.get(h.node)!.live;
    if (p.history.some(rejoining) || t.partitions.some((q) => q.history.some((h) => h.node === s.to && h.suspended)))
      return `${s.to} is rejoining or ${s.partition} has a suspended copy rejoining`;
    if (p.learners.length > 0 || p.leaving !== null || p.admission === 'closed' || p.kind === 'stream') return `${s.partition} has a change in flight`;
    if (input.inFlight.some((m) => m.partition === s.partition)) return `${s.partition} has a move in flight`;
    if (s.op === 'owner_handoff') {
      if (p.owner !== s.from || !p.followers.includes(s.to)) return `handoff ${s.partition} ${s.from}->${s.to} is not owner to follower`;
      continue;
    }
    if (!p.followers.includes(s.from)) return `${s.from} is not a follower of ${s.partition}`;
    const n = (inbound.get(s.to) ?? 0) + 1;
    if (n > config.maxTransfersPerNode) return `${s.to} gets ${n} transfers, limit ${config.maxTransfersPerNode}`;
    inbound.set(s.to, n);
    const before = [p.owner, ...p.followers];
    const after = before.map((c) => (c === s.from ? s.to : c));
    if (before.includes(s.to)) return `${s.to} already holds ${s.partition}`;
    if (from.draining) {
      // A drain's copy goes to the emptiest zone with a node that could take it, whatever zone it leaves.
      const others = before.filter((c) => c !== s.from);
      const inZone = (z: string) => others.filter((c) => zone.get(c) === z).length;
      const open = t.nodes.filter((n) => n.live && !n.draining && !before.includes(n.id) && !p.history.some((h) => h.node === n.id && h.suspended));
      const fewest = Math.min(...open.map((n) => inZone(n.zone)));
      if (inZone(to.zone) > fewest) return `${s.partition}'s copy drains to ${to.zone}, which holds ${inZone(to.zone)} of its copies, where a zone with ${fewest} could take it`;
    } else if (sameZonePairs(after, zone) > sameZonePairs(before, zone)) return `${s.partition} gets two copies in zone ${zone.get(s.to)}`;
  }
  return null;
}

/** Runs `property` and says whether fast-check found a counterexample. */
function fails<T>(arb: fc.Arbitrary<T>, predicate: (v: T) => boolean, numRuns = RUNS): boolean {
  return fc.check(fc.property(arb, predicate), { numRuns, seed: 7, endOnFailure: true }).failed;
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe('planner properties: one tick keeps every hard rule', () => {
  const holds = (c: Case): boolean => tickViolation(c, planNow(c.input, c.config)) === null;

  it('no proposal breaks a transfer limit, a zone, a cooldown, the recovery pause, or touches a partition with a change in flight', () => {
    let proposed = 0;
    let paused = 0;
    fc.assert(
      fc.property(noisy, (c) => {
        const plan = planNow(c.input, c.config);
        if (plan.steps.length > 0) proposed++;
        if (plan.idleReason?.startsWith('recovery pending')) paused++;
        const v = tickViolation(c, plan);
        if (v !== null) throw new Error(v);
      }),
      { numRuns: RUNS * 2, seed: 7 },
    );
    // The generator reaches both sides: ticks that propose and ticks the recovery pause stops.
    expect(proposed).toBeGreaterThan(RUNS / 4);
    expect(paused).toBeGreaterThan(RUNS / 10);
  });

  it.each([
    ['per-node transfer limit', () => vi.spyOn(TickPlanner.prototype, 'receiverOk').mockImplementation((n: NodeState) => n.live && !n.draining && !n.suspended)],
    ['zones', () => vi.spyOn(TickPlanner.prototype, 'canReceive').mockImplementation(function (this: TickPlanner, p, to) {
      return !this.st.holds(p, to.index);
    })],
    ['zones of a drain', () => vi.spyOn(TickPlanner.prototype, 'canAdd').mockImplementation(function (this: TickPlanner, p, to) {
      return !this.st.holds(p, to.index);
    })],
    ['node cooldowns', () => vi.spyOn(TickPlanner.prototype, 'cooling').mockReturnValue(false)],
    ['partition cooldowns and changes in flight', () => vi.spyOn(TickPlanner.prototype, 'partFree').mockReturnValue(true)],
    ['recovery pause', () => vi.spyOn(TickPlanner.prototype, 'paused').mockReturnValue(null)],
  ])('fails with the rule on %s taken out', (_rule, mutate) => {
    mutate();
    expect(fails(noisy, holds, RUNS * 2)).toBe(true);
  });
});

/** Owned partitions per capacity relative to the mean, largest |deviation|, over live nodes. */
function ownedSpread(t: Topology): number {
  const owned = new Map<string, number>(t.nodes.map((n) => [n.id, 0]));
  for (const p of t.partitions) owned.set(p.owner, owned.get(p.owner)! + 1);
  const live = t.nodes.filter((n) => n.live && !n.draining);
  const mean = t.partitions.length / live.reduce((a, n) => a + n.capacity, 0);
  return Math.max(...live.map((n) => Math.abs(owned.get(n.id)! / n.capacity / mean - 1)));
}

describe('planner properties: no oscillation', () => {
  const quiet = arbCase({ noise: false, zones: true });
  /** The same cluster with the threshold just above its spreads: every node is within it. */
  const withinBand = quiet
    .map((c) => {
      const spread = planNow(c.input, c.config).spreadBefore;
      const threshold = Math.max(spread, ownedSpread(c.input.topology)) + 1e-9;
      // Bands as wide as they go: a node holding none of a dimension is still outside, and gets copies.
      return { ...c, config: { ...c.config, threshold, bands: { replicas: 0.99, owned: 0.99, disk: 0.99, traffic: 0.99 } } };
    })
    .filter((c) => dimensionBands(c.input, c.config).every((d) => d.inside));
  const holds = (c: Case): boolean => planNow(c.input, c.config).steps.length === 0;

  it('a cluster within the threshold and inside every band gets no proposal', () => {
    fc.assert(fc.property(withinBand, holds), { numRuns: RUNS, seed: 7 });
  });

  it('fails with the band rule taken out', () => {
    vi.spyOn(TickPlanner.prototype, 'outsideBand').mockReturnValue(true);
    expect(fails(withinBand, holds)).toBe(true);
  });
});

describe('planner properties: planning to convergence', () => {
  /**
   * No replica moves twice or back: a node that received a copy never gives it, one that gave it never takes it back
   * (`movesOnce`'s own cases are in planner-settling.test.ts).
   */
  const once = (c: Case): boolean => movesOnce(planToConvergence(c.input, { ...c.config, maxTransfersPerCluster: 3 }).steps);

  it('never moves the same replica twice or back, and ends', () => {
    fc.assert(fc.property(noisy, once), { numRuns: RUNS, seed: 7 });
  });

  // Settled and netted (planner/net.ts), a plan is still carried out one step at a time: each step's source holds
  // what it gives and its target does not, after the moves in flight and every step before it.
  const stepByStep = (c: Case): boolean => carriedOut(c.input.topology, [...c.input.inFlight, ...planToConvergence(c.input, c.config).steps]);

  it('is carried out step by step in order, after the moves in flight', () => {
    fc.assert(fc.property(noisy, stepByStep), { numRuns: RUNS, seed: 7 });
  });

  // Two rules guard it: the memory of moved replicas, and the margin (every move lowers the cluster's spread, so
  // undoing one never improves it). Either alone keeps the property; with both out, moves go back and forth.
  it('fails with the memory of moved replicas and the margin taken out', () => {
    vi.spyOn(TickPlanner.prototype, 'remember').mockImplementation(() => undefined);
    vi.spyOn(TickPlanner.prototype, 'improves').mockReturnValue(true);
    expect(fails(noisy, once, 40)).toBe(true);
  });

  /** Uniform partitions on nodes of mixed capacities: at convergence copies per capacity are within the band. */
  const mixed = fc
    .record({ caps: fc.array(fc.constantFrom(1, 2, 3), { minLength: 5, maxLength: 9 }), perCap: fc.integer({ min: 12, max: 24 }), loaded: fc.nat() })
    // Feasible only when no node's share exceeds one copy of every partition (three copies each).
    .filter(({ caps }) => Math.max(...caps) * 3 <= 0.8 * caps.reduce((a, b) => a + b, 0))
    .map(({ caps, perCap, loaded }) => {
      const nodes = caps.map((capacity, i) => node(`n${i}`, { capacity }));
      // Copies spread evenly by count, ignoring capacity, over every node or all but a new empty one.
      const holders = caps.length - (loaded % 2);
      const count = Math.round((perCap * caps.reduce((a, b) => a + b, 0)) / 3);
      const parts = Array.from({ length: count }, (_, i) => {
        const o = i % holders;
        const f = [(o + 1) % holders, (o + 2) % holders].map((x) => `n${x}`);
        return partition(`q-${i}`, `n${o}`, f, { historyBytes: 1e6, publishRate: 10, deliveryRate: 10 });
      });
      return { topology: topology(nodes, parts), config: { ...DEFAULT_PLANNER_CONFIG, threshold: 0.15, maxTransfersPerCluster: 50, maxTransfersPerNode: 10 } };
    });

  function capacityRespected(m: { topology: Topology; config: PlannerConfig }): boolean {
    const plan = planToConvergence({ topology: m.topology, inFlight: [], cooldowns: { nodes: {}, partitions: {} }, now: 0 }, m.config);
    const count = new Map<string, number>(m.topology.nodes.map((n) => [n.id, 0]));
    for (const copies of applySteps(m.topology, plan.steps).values()) for (const n of copies) count.set(n, count.get(n)! + 1);
    const total = [...count.values()].reduce((a, b) => a + b, 0);
    const capSum = m.topology.nodes.reduce((a, n) => a + n.capacity, 0);
    // Within the band plus one copy of granularity either way (a copy is at most 1/12 of a node's share here).
    return m.topology.nodes.every((n) => Math.abs(count.get(n.id)! / n.capacity / (total / capSum) - 1) <= m.config.threshold + 2 / 12 + 0.05);
  }

  it('respects capacities at convergence: copies per capacity end within the band', () => {
    fc.assert(fc.property(mixed, capacityRespected), { numRuns: 60, seed: 7 });
  });

  it('fails with capacities ignored', () => {
    const steady = ClusterState.prototype.steady;
    const copyDelta = ClusterState.prototype.copyDelta;
    vi.spyOn(ClusterState.prototype, 'steady').mockImplementation(function (this: ClusterState, n) {
      return steady.call(this, n) * n.cap;
    });
    vi.spyOn(ClusterState.prototype, 'copyDelta').mockImplementation(function (this: ClusterState, p, n, owner, sign) {
      return copyDelta.call(this, p, n, owner, sign) * n.cap;
    });
    expect(fails(mixed, capacityRespected, 60)).toBe(true);
  });
});

describe('planner properties: the search skips only copies that cannot win', () => {
  /** The plan with the search's skips equals the plan of a search that weighs every copy. */
  function sameAsFullSearch(c: Case): boolean {
    const steps = (): string => JSON.stringify(planToConvergence(c.input, c.config).steps);
    const skipping = steps();
    const mayBeat = TickPlanner.prototype.mayBeat;
    TickPlanner.prototype.mayBeat = () => true;
    try {
      return steps() === skipping;
    } finally {
      TickPlanner.prototype.mayBeat = mayBeat;
    }
  }

  it('plans exactly as a search that weighs every copy', () => {
    fc.assert(fc.property(noisy, sameAsFullSearch), { numRuns: RUNS, seed: 7 });
  });

  it('fails when the skip keeps only copies that improve the score more than the best so far (a copy that fits better can win)', () => {
    vi.spyOn(TickPlanner.prototype, 'mayBeat').mockImplementation((best, bound) => bound > best.imp);
    expect(fails(noisy, sameAsFullSearch)).toBe(true);
  });
});

describe('planner properties: operator pins and exclusions', () => {
  const by = { by: 'alice', reason: 'under investigation' };
  /** The noisy clusters with some partitions pinned and a node or two excluded (chained: `noisy` itself draws as before). */
  const held = noisy.chain((c) =>
    fc
      .record({
        pins: fc.subarray(c.input.topology.partitions.map((p) => p.id), { maxLength: 5 }),
        excluded: fc.subarray(c.input.topology.nodes.map((n) => n.id), { maxLength: 2 }),
      })
      .map(({ pins, excluded }) => ({
        ...c,
        input: { ...c.input, pinned: Object.fromEntries(pins.map((id) => [id, by])), excluded: Object.fromEntries(excluded.map((id) => [id, by])) },
      })),
  );
  /** No step of a tick or of the whole plan moves a pinned partition, or moves a copy or ownership onto or off an excluded node. */
  function leftAlone(c: Case): boolean {
    const { pinned = {}, excluded = {} } = c.input;
    for (const plan of [planNow(c.input, c.config), planToConvergence(c.input, c.config)]) {
      if (plan.steps.some((s) => s.partition in pinned || s.from in excluded || s.to in excluded)) return false;
    }
    return true;
  }

  it('no plan moves a pinned partition or touches an excluded node', () => {
    let proposed = 0;
    fc.assert(
      fc.property(held, (c) => {
        if (planNow(c.input, c.config).steps.length > 0) proposed++;
        return leftAlone(c);
      }),
      { numRuns: RUNS, seed: 7 },
    );
    // The rest of the cluster is still planned.
    expect(proposed).toBeGreaterThan(RUNS / 5);
  });

  it.each([
    ['pins', () => vi.spyOn(TickPlanner.prototype, 'pinned').mockReturnValue(false)],
    ['exclusions', () => vi.spyOn(TickPlanner.prototype, 'excluded').mockReturnValue(false)],
  ])('fails with the rule on %s taken out', (_rule, mutate) => {
    mutate();
    expect(fails(held, leftAlone)).toBe(true);
  });
});

describe('planner plans pinned', () => {
  /**
   * Plans recorded from the planner before its state moved to typed arrays: a change to how the state is kept must
   * not change a single proposal, reason or figure of a plan (sha256 of the plans in order). Re-pinned when a rule
   * changes on purpose (a down draining node sheds its follower copies: the random clusters include such nodes;
   * idle reasons name the blocker and when a cooldown ends: the steps stayed the same; owner roles also even out
   * the total score where no copy can move, a cooling node may still hand off owner roles, and lost copies count in
   * the mean: 1037 steps became 1024; per-dimension bands guard every step and copies are ranked by how they fit
   * what a node lacks: 1024 became 1069, and the ring of 40 with hot partitions 739 became 1064; a drain puts each copy
   * in the emptiest zone that can take it, as a repair does: 1069 became 1067; a receiver's owner roles are left to
   * handoffs, follower moves no longer making them up in copies: 1067 became 1064, and the ring 1064 became 1015; a
   * band move that leaves both nodes inside every band needs no margin: the ring 1015 became 1016; sources judged
   * after their handoffs and copies fitted to the band edges: 1098, the ring 948; owner handoffs keep the owned band
   * but from a source above the score's band, and one that brings a pair nearer it needs no margin: 1098 became 1131;
   * copies' shares go by what the zone rule lets each zone hold: 1131 became 1136; a handoff that mends the owned or
   * traffic band is made whatever the totals say, and none takes a node further outside them: 1136 became 1183; an
   * owner hands its role off to free its copy for a node holding a retained copy where only whole copies would move
   * otherwise: 1183 became 1180, 5 such handoffs in the 200 clusters, 0.8% fewer bytes copied; a plan settles, planned
   * again on what it leaves and its steps netted: 1180 became 1184; a settling round reads the zone rule's shares again from
   * the placement it starts on: 1184 became 1186).
   */
  function digest(cases: Case[]): { steps: number; sha: string } {
    const h = createHash('sha256');
    let steps = 0;
    for (const c of cases) {
      for (const plan of [planNow(c.input, c.config), planToConvergence(c.input, c.config)]) {
        // The bands report (issue 18) only measures the plan: the digest pins what the planner decides.
        const { planningMs: _, dimensions: __, ...rest } = plan;
        steps += plan.steps.length;
        h.update(JSON.stringify(rest));
      }
    }
    return { steps, sha: h.digest('hex') };
  }

  it('random clusters plan as before', () => {
    expect(digest(fc.sample(noisy, { seed: 11, numRuns: 200 }))).toEqual({ steps: 1186, sha: '70fead7358ef01ddb9b648764169d433fcdf87d4c58629fd6914756a08239877' });
  });

  it('a ring of 40 nodes, 4 joining, with hot partitions and retained copies, plans as before', () => {
    const t = ring(40, 4, 30);
    t.partitions.forEach((p, i) => {
      const q = p as LoadedPartition;
      q.historyBytes = 1_000_000 + (i % 97) * 10_000;
      q.publishRate = i % 17 === 0 ? 200 : 10 + (i % 13);
      if (i % 11 === 0) q.retainedCopies = [{ node: `n${40 + (i % 4)}`, durableOffset: 0, removedAt: 0, retainedUntil: 1e12, bytesToCatchUp: 1000 * (i % 7) }];
    });
    const config = { ...DEFAULT_PLANNER_CONFIG, maxTransfersPerCluster: 16 };
    expect(digest([{ input: input(t), config }, { input: input(t, { draining: ['n3'] }), config }])).toEqual({ steps: 948, sha: '7487fe4c248309ae0c23fb1ac9bbfaa7f0bef47d01955f3f10b08d2b43aba757' });
  });
});
