/**
 * The model-based tests' driver over the pure simulation core, shared by model.test.ts and mutation.test.ts.
 * It plays the workflow's role: it walks queue partitions through the note's steps (add learner, swap,
 * remove, promote, drop, owner handoff), mixes in random illegal writes, publishes and time steps, and aims
 * faults at the replicas of the move in flight (owner, R, T) within the fault budget (at most W - 1 lost
 * disks per partition), and swaps back when T is down after the swap. After the commands, faults stop and the driver finishes what is in flight
 * (settle): every move must end within a bound derived from its bytes, or the sequence fails its liveness
 * check.
 */
import type { GuardedWriteName, Fault, WriteReply } from '../../cluster/contract';
import { ClusterSim } from '../../cluster/sim/sim';
import type { PartitionState } from '../../cluster/sim/types';
import { fastConfig } from './helpers';
import { pid, QUEUES, RATES, type Cmd, type FaultCmd, type Phase, type Role, type Scenario, type Shape, type Who } from './model-commands';
import { emptyCoverage, type Coverage } from './model-coverage';

export { scenarioArb, type Scenario } from './model-commands';
export { emptyCoverage, formatCoverage, type Coverage } from './model-coverage';

const OK_COUNTERS: Partial<Record<GuardedWriteName, keyof Coverage>> = {
  'add-learner': 'movesStarted',
  swap: 'swaps',
  'remove-leaving': 'removals',
  'promote-learner': 'promotions',
  'drop-learner': 'learnersDropped',
  'commit-owner': 'handoffs',
};

export class Driver {
  private key = 0;
  private armed: FaultCmd[] = [];
  readonly log: string[] = [];
  /**
   * The moves in flight by partition and T, from the driver's own accepted writes: one starts at add-learner and
   * ends at promote-learner or remove-leaving (completed, or undone by a swap back) or drop-learner (aborted).
   */
  readonly moves = new Map<string, Map<string, 'learning' | 'swapped'>>();
  constructor(
    public sim: ClusterSim,
    readonly cov: Coverage = emptyCoverage(),
  ) {}

  nodeId(i: number): string {
    const ids = [...this.sim.nodes.keys()];
    return i < ids.length ? ids[i]! : `n${i + 10}`;
  }

  /** A guarded write, checked: a refusal changes nothing, an acceptance bumps the generation by one, only promote changes W. */
  write(p: PartitionState, name: GuardedWriteName, body: Record<string, unknown>, genDelta = 0): WriteReply {
    const before = JSON.stringify(this.sim.partitionRecord(p));
    const g = p.generation;
    const w = p.writeRequirement;
    const expectedGeneration = Math.max(0, g + genDelta);
    const req = { expectedGeneration, idempotencyKey: `k${this.key++}`, ...body };
    const r = this.sim.write(p.id, name, req as never);
    this.log.push(`${name} ${p.id} ${JSON.stringify(body)} -> ${r.ok ? 'ok' : r.refusal.code}`);
    if (r.ok) {
      check(p.generation === g + 1, `${name} on ${p.id} moved the generation from ${g} to ${p.generation}`);
      check(name === 'promote-learner' || p.writeRequirement === w, `${name} on ${p.id} changed W from ${w} to ${p.writeRequirement}`);
      const counter = OK_COUNTERS[name];
      if (counter) this.cov[counter]++;
      if (name === 'remove-leaving' || name === 'promote-learner') this.cov.movesCompleted++;
      this.track(p.id, name, body);
    } else {
      check(JSON.stringify(this.sim.partitionRecord(p)) === before, `refused ${name} on ${p.id} (${r.refusal.code}) changed the partition`);
    }
    return r;
  }

  /** Keeps the ledger of moves in flight after an accepted write. */
  private track(partition: string, name: GuardedWriteName, body: Record<string, unknown>): void {
    const moves = this.moves.get(partition) ?? new Map<string, 'learning' | 'swapped'>();
    this.moves.set(partition, moves);
    const end = (t: string) => {
      if (moves.delete(t)) this.cov.movesEnded++;
    };
    if (name === 'add-learner') moves.set(body.node as string, 'learning');
    else if (name === 'promote-learner' || name === 'drop-learner') end(body.node as string);
    // A swap back names R as the learner: the move it undoes stays swapped until T is removed.
    else if (name === 'swap' && moves.has(body.learner as string)) moves.set(body.learner as string, 'swapped');
    else if (name === 'remove-leaving') for (const [t, stage] of moves) if (stage === 'swapped') end(t);
  }

  /** Moves started that have not ended, as `partition T (stage)`. */
  openMoves(): string[] {
    return [...this.moves].flatMap(([p, moves]) => [...moves].map(([t, stage]) => `${p} ${t} (${stage})`));
  }

  live(n: string): boolean {
    return this.sim.nodes.get(n)?.live ?? false;
  }

  counted(p: PartitionState): string[] {
    return p.followers.filter((f) => {
      const h = p.history.find((e) => e.node === f);
      return h && !h.suspended && this.live(f);
    });
  }

  /** R for a swap: half the time a follower that is down or suspended (replacing a lost copy), else any. */
  private leavingFor(p: PartitionState, r: number): string | undefined {
    const lost = p.followers.filter((f) => !this.live(f) || p.history.some((h) => h.node === f && h.suspended));
    const pool = lost.length > 0 && r % 2 === 0 ? lost : p.followers;
    return pool[Math.floor(r / 2) % Math.max(1, pool.length)];
  }

  private phase(p: PartitionState): Phase | null {
    if (p.admission === 'closed') return 'closed';
    if (p.leaving) return 'swapped';
    const t = p.learners[0];
    if (!t) return null;
    return p.history.some((h) => h.node === t && !h.suspended) ? 'admitted' : 'learning';
  }

  /** Fires the faults armed for this partition's current phase; true when one fired. */
  private fireArmed(p: PartitionState): boolean {
    const phase = this.phase(p);
    const due = this.armed.filter((c) => pid(c.p) === p.id && c.at === phase);
    if (due.length === 0) return false;
    this.armed = this.armed.filter((c) => !due.includes(c));
    for (const c of due) this.inject(c);
    return true;
  }

  /** The next legal-looking step of a move for this partition, as the workflow would take it. */
  step(p: PartitionState, r: number): void {
    if (this.fireArmed(p) || p.pendingRecovery) return;
    if (p.admission === 'closed') {
      const counted = this.counted(p);
      if (p.finalBoundary !== null && counted.length > 0 && r % 4 !== 0) {
        const certificate = { finalBoundary: p.finalBoundary, epoch: p.epoch };
        // Now and then a follower that does not count (down, suspended): the cluster must refuse it.
        const pool = r % 3 === 0 ? p.followers : counted;
        const res = this.write(p, 'commit-owner', { newOwner: pool[r % pool.length]!, certificate });
        if (!res.ok && r % 2 === 0) this.write(p, 'reopen-admission', {});
      } else {
        this.write(p, 'reopen-admission', {});
      }
      return;
    }
    if (p.leaving) {
      // The way out when T is down after the swap: swap back, then (half the time at once, before R may
      // cover B') try to remove T.
      const back = this.swapBack(p, r % 3 !== 0);
      if (!back || r % 2 === 0) this.write(p, 'remove-leaving', { node: p.leaving });
      return;
    }
    const learner = p.learners[0];
    if (learner) {
      const admitted = p.history.some((h) => h.node === learner && !h.suspended);
      const k = r % 10;
      // Now and then a swap or promotion of a learner not admitted yet: the cluster must refuse it.
      const early = admitted || Math.floor(r / 10) % 2 === 0;
      const leaving = this.leavingFor(p, r);
      if (!this.live(learner) && k < 8) {
        // The note: if T fails before step 1, drop the learner.
        this.write(p, 'drop-learner', { node: learner });
      } else if (early && k < 5 && leaving) {
        this.write(p, 'swap', { learner, leaving });
      } else if (early && k < 8 && p.replicationFactor < 6) {
        this.write(p, 'promote-learner', { node: learner });
      } else if (k === 8 || (!admitted && r % 17 === 0)) {
        this.write(p, 'drop-learner', { node: learner });
      }
      return;
    }
    if (r % 10 === 0) {
      this.write(p, 'close-admission', {});
      return;
    }
    const members = new Set([p.owner, ...p.followers]);
    const free = [...this.sim.nodes.keys()].filter((n) => !members.has(n));
    // The note: a target that still holds a retained copy is much cheaper and wins ties.
    const warm = free.filter((n) => p.retainedCopies.some((c) => c.node === n));
    const pool = warm.length > 0 && r % 2 === 0 ? warm : free;
    if (pool.length === 0) return;
    const target = pool[r % pool.length]!;
    const added = this.write(p, 'add-learner', { node: target });
    // Such a target starts near the tail and is admitted at the next tick: half the time the workflow's next
    // step comes before it, in the same tick (promote or swap a learner not admitted: the cluster must refuse).
    if (!added.ok || !warm.includes(target) || Math.floor(r / 2) % 2 !== 0) return;
    const leaving = this.leavingFor(p, r);
    if (r % 3 !== 0 && p.replicationFactor < 6) this.write(p, 'promote-learner', { node: target });
    else if (leaving) this.write(p, 'swap', { learner: target, leaving });
  }

  /**
   * The swap back when the replica that joined in R's place is down (`when` false: it is not tried); true when
   * the cluster accepted it. Now and then R is not live or not caught up: the cluster must refuse it.
   */
  private swapBack(p: PartitionState, when: boolean): boolean {
    const b = p.boundary;
    if (!when || !b || p.leaving !== b.leaving || this.live(b.joined)) return false;
    const ok = this.write(p, 'swap', { learner: b.leaving, leaving: b.joined }).ok;
    if (ok) this.cov.swapBacks++;
    return ok;
  }

  random(c: Extract<Cmd, { t: 'random' }>): void {
    const p = this.sim.partition(pid(c.p));
    const node = this.who(p, c.node, c.r);
    const other = this.who(p, c.other, c.r + 1);
    const body: Record<string, Record<string, unknown>> = {
      'add-learner': { node },
      'drop-learner': { node },
      swap: { learner: node, leaving: other },
      'remove-leaving': { node },
      'promote-learner': { node },
      'close-admission': {},
      'commit-owner': {
        newOwner: node,
        certificate: { finalBoundary: c.r % 2 ? (p.finalBoundary ?? c.r) : c.r, epoch: c.r % 3 ? p.epoch : c.r % 5 },
      },
      'reopen-admission': {},
    };
    this.write(p, c.write, body[c.write]!, c.gen);
  }

  private who(p: PartitionState, who: Who, r: number): string {
    const pick = (xs: string[]) => xs[r % xs.length];
    const members = [p.owner, ...p.followers, ...p.learners, ...(p.leaving ? [p.leaving] : [])];
    switch (who) {
      case 'learner':
        return p.learners[0] ?? this.target(p, 'follower', r);
      case 'suspended':
        return pick(p.history.filter((h) => h.suspended).map((h) => h.node)) ?? this.target(p, 'follower', r);
      case 'down':
        return pick(members.filter((n) => !this.live(n))) ?? this.target(p, 'follower', r);
      case 'free':
        return pick([...this.sim.nodes.keys()].filter((n) => !members.includes(n))) ?? this.nodeId(r % 9);
      case 'id':
        return this.nodeId(r % 9);
      default:
        return this.target(p, who, r);
    }
  }

  /** Nodes already lost (disk lost, or down for good) per partition, plus `node`, stay within W - 1. */
  withinBudget(node: string, lostForGood: Set<string> = new Set()): boolean {
    for (const p of this.sim.partitions.values()) {
      if (!(node in p.replicas) && !p.history.some((h) => h.node === node)) continue;
      const lost = new Set(p.lostCopies.map((l) => l.node));
      for (const n of lostForGood) if (n in p.replicas) lost.add(n);
      lost.add(node);
      const wMin = Math.min(p.writeRequirement, ...p.segments.map((s) => s.w));
      if (lost.size > wMin - 1) return false;
    }
    return true;
  }

  private target(p: PartitionState, role: Role, r: number): string {
    const pick = (xs: string[]) => xs[r % xs.length];
    switch (role) {
      case 'owner':
        return p.owner;
      case 'leaving':
        return p.leaving ?? pick(p.followers) ?? p.owner;
      case 'joined':
        return p.boundary?.joined ?? p.learners[0] ?? pick(p.followers) ?? p.owner;
      case 'follower':
        return pick(p.followers) ?? p.owner;
      case 'any':
        return this.nodeId(r % this.sim.nodes.size);
    }
  }

  fault(c: FaultCmd): void {
    if (c.at === 'now') this.inject(c);
    else this.armed.push(c);
  }

  private inject(c: FaultCmd): void {
    const p = this.sim.partition(pid(c.p));
    if (c.kind === 'laggards') {
      // The owner and W - 1 followers (from r on) keep up; every other replica of the partition stalls.
      const keep = new Set([p.owner, ...[...p.followers, ...p.followers].slice(c.r % Math.max(1, p.followers.length)).slice(0, p.writeRequirement - 1)]);
      for (const n of Object.keys(p.replicas)) {
        if (!keep.has(n) && !p.stalled.includes(n)) this.apply({ fault: 'stall-transfer', partition: p.id, node: n, stalled: true }, n);
      }
      return;
    }
    const node = this.target(p, c.role, c.r);
    let f: Fault;
    switch (c.kind) {
      case 'crash-node':
      case 'restart-node':
        f = { fault: c.kind, node };
        break;
      case 'lose-disk':
        if (!this.withinBudget(node)) return;
        f = { fault: 'lose-disk', node };
        break;
      case 'fail-owner':
        f = { fault: 'fail-owner', partition: p.id };
        break;
      case 'stall-transfer':
        f = { fault: 'stall-transfer', partition: p.id, node, stalled: c.role === 'joined' || c.r % 2 === 0 };
        break;
      case 'set-draining':
        f = { fault: 'set-draining', node, draining: c.r % 2 === 0 };
        break;
      case 'refuse-next-write':
        f = c.r % 2 ? { fault: 'refuse-next-write', partition: p.id } : { fault: 'refuse-next-write' };
        break;
      case 'events':
        f = c.r % 2 ? { fault: 'delay-events', ms: c.r * 3 } : { fault: 'drop-events', count: c.r % 4 };
        break;
    }
    this.apply(f, node);
  }

  private apply(f: Fault, node: string): void {
    const midMove = [...this.sim.partitions.values()].some((q) => q.learners.length > 0 || q.leaving !== null);
    if (midMove) this.cov.faultsMidMove++;
    if (f.fault === 'lose-disk') {
      this.cov.diskLosses++;
      const aroundSwap = [...this.sim.partitions.values()].some((q) => q.boundary && (q.boundary.joined === node || q.boundary.leaving === node));
      if (aroundSwap) this.cov.diskLossesAroundSwap++;
    }
    this.log.push(`fault ${JSON.stringify(f)}`);
    this.sim.fault(f);
  }

  run(c: Cmd): void {
    this.cov.commands++;
    switch (c.t) {
      case 'step':
        for (let i = 0; i < c.burst; i++) this.step(this.sim.partition(pid(c.p)), c.r + 7 * i);
        return;
      case 'random':
        return this.random(c);
      case 'publish':
        this.log.push(`publish ${pid(c.p)} ${c.count}`);
        this.sim.publish(pid(c.p), c.count);
        return;
      case 'rate':
        this.log.push(`rate ${pid(c.p)} ${c.rate}`);
        this.sim.setRate(pid(c.p), c.rate);
        return;
      case 'advance':
        for (const p of this.sim.partitions.values()) this.fireArmed(p);
        this.log.push(`advance ${c.ms}`);
        this.sim.advance(c.ms);
        return;
      case 'fault':
        return this.fault(c);
    }
  }

  /**
   * Settled: nothing in flight (no learner without a move, no R without one), every copy that counts is in
   * the accepted history, and every live replica is back in it.
   */
  settled(p: PartitionState): boolean {
    if (p.pendingRecovery || p.admission !== 'open' || p.learners.length > 0 || p.leaving) return false;
    if (![p.owner, ...p.followers].every((n) => p.history.some((h) => h.node === n))) return false;
    return p.history.every((h) => !h.suspended || !this.live(h.node));
  }

  /** The workflow's next step while settling: finish what is in flight, start nothing new. */
  finish(p: PartitionState): void {
    if (p.pendingRecovery) return;
    if (p.admission === 'closed') {
      // A handoff that was not committed is cancelled: the old owner reopens admission.
      this.write(p, 'reopen-admission', {});
      return;
    }
    if (p.leaving) {
      // T lost for good after the swap: the swap back is the way out.
      if (!this.swapBack(p, true)) this.write(p, 'remove-leaving', { node: p.leaving });
      return;
    }
    const learner = p.learners[0];
    if (!learner) return;
    if (!this.live(learner)) {
      this.write(p, 'drop-learner', { node: learner });
      return;
    }
    const leaving = this.leavingFor(p, 0);
    if (leaving && p.history.some((h) => h.node === learner && !h.suspended)) this.write(p, 'swap', { learner, leaving });
  }

  /**
   * Bytes every transfer still has to copy (learners and suspended replicas: the checkpoint left plus the
   * log from where it stands to the tail). All of them share one slot's rate in the worst case.
   */
  transferBytes(): number {
    const { messageBytes } = this.sim.config;
    let bytes = 0;
    for (const p of this.sim.partitions.values()) {
      for (const [n, r] of Object.entries(p.replicas)) {
        const suspended = p.history.some((h) => h.node === n && h.suspended);
        if (!p.learners.includes(n) && !suspended) continue;
        const from = r.ckpt ? r.ckpt.offset : r.durable;
        bytes += (r.ckpt ? r.ckpt.totalBytes - r.ckpt.doneBytes : 0) + Math.max(0, p.tail + p.waiting - from) * messageBytes;
      }
    }
    return bytes;
  }

  /**
   * Faults stop: stalls and draining are lifted, every down node restarts except `lostForGood` of them
   * (nodes that own nothing, are no move's T, and stay within the fault budget), and the driver finishes
   * every partition. Each must settle, and every move started must end (completed or aborted by the driver's
   * own write: a partition gone quiet with a move that never ended lost it), within the recovery delay, plus all
   * transfer bytes at the slowest rate a transfer can see (one slot's share of a node's rate, minus the fastest
   * publish rate), plus a few ticks per step of a move. Returns a failure description, or null.
   */
  settle(lostForGood: number): string | null {
    const sim = this.sim;
    const c = sim.config;
    for (const p of sim.partitions.values()) {
      for (const n of [...p.stalled]) sim.fault({ fault: 'stall-transfer', partition: p.id, node: n, stalled: false });
    }
    for (const n of sim.nodes.values()) if (n.draining) sim.fault({ fault: 'set-draining', node: n.id, draining: false });
    const keepDown = new Set<string>();
    const owners = new Set([...sim.partitions.values()].map((p) => p.owner));
    // A T down past its swap comes first: only the swap back can finish its move.
    const joined = new Set([...sim.partitions.values()].flatMap((p) => (p.boundary ? [p.boundary.joined] : [])));
    const candidates = [...sim.nodes.values()]
      .filter((n) => !n.live && !owners.has(n.id) && this.withinBudget(n.id))
      .sort((a, b) => Number(joined.has(b.id)) - Number(joined.has(a.id)));
    if (lostForGood > 0 && candidates.length > 0) keepDown.add(candidates[0]!.id);
    this.cov.lostForGood += keepDown.size;
    for (const n of sim.nodes.values()) if (!n.live && !keepDown.has(n.id)) sim.fault({ fault: 'restart-node', node: n.id });
    this.log.push(`settle: faults stop, ${[...keepDown].join(', ') || 'no node'} lost for good`);

    const maxRate = Math.max(...RATES, ...[...sim.partitions.values()].map((p) => p.publishRate));
    const slotRate = c.transferBytesPerSec / c.perNodeLimit - maxRate * c.messageBytes;
    if (slotRate <= 0) throw new Error(`the model's transfer rate ${c.transferBytesPerSec} B/s cannot outrun publishing at ${maxRate}/s`);
    const bound = c.recoveryDelayMs + (1000 * this.transferBytes()) / slotRate + 30 * c.tickMs;
    const queues = [...sim.partitions.values()].filter((p) => p.kind === 'queue');
    const start = sim.now;
    const unsettled = () => queues.filter((p) => !this.settled(p));
    if (unsettled().length > 0) this.cov.settled++;
    while (unsettled().length > 0 || this.openMoves().length > 0) {
      if (sim.now - start > bound) {
        const stuck = unsettled().map((p) => `${p.id}: ${JSON.stringify(sim.stateOf(p))}`);
        const open = this.openMoves();
        return (
          `liveness: after faults stopped, within ${Math.round(bound)} ms ${stuck.length} partition(s) did not settle and ${open.length} move(s) did not end:\n` +
          [...stuck, ...open.map((m) => `move ${m} never ended`)].join('\n')
        );
      }
      for (const p of queues) this.finish(p);
      sim.advance(c.tickMs);
    }
    this.cov.worstBoundUse = Math.max(this.cov.worstBoundUse, (sim.now - start) / bound);
    return null;
  }
}

/** A model property failed: a refused write changed something, or a generation or W moved wrongly. */
export class ModelPropertyError extends Error {}

function check(ok: boolean, message: string): void {
  if (!ok) throw new ModelPropertyError(message);
}

export function newSim(shape: Shape, seed: number): ClusterSim {
  return ClusterSim.create({
    nodes: shape.nodes,
    partitions: QUEUES,
    streams: 1,
    config: {
      ...fastConfig,
      seed,
      replicationFactor: shape.rf,
      durability: shape.durability,
      transferBytesPerSec: 200_000,
      perNodeLimit: 2,
      clusterLimit: 4,
    },
  });
}

export interface Outcome {
  driver: Driver;
  /** A liveness failure, or null. */
  liveness: string | null;
}

/** Runs one scenario to the end: its commands, then faults stop and the driver settles every partition. */
export function runScenario(s: Scenario, cov: Coverage, prepare: (sim: ClusterSim) => void = () => {}): Outcome {
  const sim = newSim(s.shape, s.seed);
  prepare(sim);
  const driver = new Driver(sim, cov);
  cov.sequences++;
  const handoffs = cov.handoffs;
  for (const c of s.cmds) driver.run(c);
  // The last fault: owners fail, so a recovery has to find every confirmed message in whatever state the
  // commands left (a promoted or swapped-in copy included).
  for (const p of sim.partitions.values()) if (p.kind === 'queue' && s.ownersFail) sim.fault({ fault: 'fail-owner', partition: p.id });
  const liveness = driver.settle(s.lostForGood);
  if (liveness) cov.livenessFailures++;
  cov.breaches += sim.invariants().breaches.length;
  // The epoch rises once per activated recovery and once per committed handoff.
  for (const p of sim.partitions.values()) cov.recoveries += p.epoch - 1;
  cov.recoveries -= cov.handoffs - handoffs;
  return { driver, liveness };
}

export function describeFailure(driver: Driver, what: string): string {
  return `${what}\nlast steps:\n${driver.log.slice(-60).join('\n')}`;
}
