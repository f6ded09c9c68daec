/**
 * Whether a follower move may start: pure, so the CLI checks it before starting a workflow and the
 * workflow checks it again against what the broker says at its first step. Nothing is written on a "no".
 */
import type { Node, Partition } from '../cluster/contract';

export type MoveCheck = { ok: true } | { ok: false; code: string; message: string };

export function checkFollowerMove(partition: Partition, nodes: Node[], from: string, to: string): MoveCheck {
  const no = (code: string, message: string): MoveCheck => ({ ok: false, code, message });
  const id = partition.id;
  if (partition.kind !== 'queue') {
    return no('not_a_queue', `partition ${id} is a stream: only queue partitions can move (streams need their own seal path)`);
  }
  if (from === to) return no('same_node', `--from and --to are both ${from}: a move needs two different nodes`);
  const known = new Map(nodes.map((n) => [n.id, n]));
  for (const node of [from, to]) {
    if (!known.has(node)) {
      return no('unknown_node', `node ${node} is not in the cluster (known: ${[...known.keys()].join(', ')})`);
    }
  }
  if (partition.owner === from) {
    return no(
      'not_a_follower',
      `${from} owns ${id}: an owner moves only by a planned handoff; choose one of its followers (${partition.followers.join(', ') || 'none'})`,
    );
  }
  if (!partition.followers.includes(from)) {
    const role = partition.learners.includes(from) ? 'a learner' : partition.leaving === from ? 'leaving' : 'not a replica';
    return no(
      'not_a_follower',
      `${from} is ${role} of ${id}: --from must be one of its followers (${partition.followers.join(', ') || 'none'})`,
    );
  }
  const holders = [partition.owner, ...partition.followers, ...partition.learners, ...(partition.leaving ? [partition.leaving] : [])];
  if (holders.includes(to)) {
    return no('already_a_replica', `${to} already holds a copy of ${id} (owner ${partition.owner}, followers ${partition.followers.join(', ')}${partition.learners.length ? `, learners ${partition.learners.join(', ')}` : ''})`);
  }
  const target = known.get(to)!;
  if (!target.live) return no('node_down', `target ${to} is down: a move needs a live target`);
  if (target.draining) return no('node_draining', `target ${to} is draining: it takes no new copies`);
  return { ok: true };
}

/** Where a catching-up replica is, in the order a transfer goes through. */
export type TransferPhase = 'checkpoint' | 'tail' | 'caught_up';
const PHASE_ORDER: Record<TransferPhase, number> = { checkpoint: 0, tail: 1, caught_up: 2 };

/** One report of T's transfer, from a progress read or a progress event. */
export interface TargetReport {
  durableOffset: number;
  bytesRemaining: number;
  /** Progress reads only. */
  phase?: TransferPhase;
  /**
   * The broker's own stall verdict, on the clock the watch runs on (the broker's, or before patch
   * decide-on-timers the workflow's): since when the transfer made no progress, null while it progresses,
   * undefined when the broker does not say.
   */
  stalledSince?: number | null;
  /** The broker paused this rebalancing transfer so that recovery transfers on T go first. */
  pausedForRecovery?: boolean;
}

/**
 * Whether T's transfer is alive, for the stall abort and the catch-up deadline of one attempt. Progress is
 * any of: durable offset rising, bytes remaining falling below the least seen, phase advancing. Where the
 * broker reports a stall verdict it is the authority (a checkpoint keeps the durable offset flat for as long
 * as it takes); the workflow's own clock is the fallback for a broker that never reports one. Time paused for
 * recovery counts toward neither limit. `durableOnly` keeps the first rule (only a rising durable offset is
 * progress) for moves started before the patch.
 */
export class TargetWatch {
  private durable = -1;
  private leastBytes = Infinity;
  private phase = -1;
  private lastProgressAt: number;
  /** The stall clock never starts before this: the attempt's start or the end of the last pause. */
  private clockFrom: number;
  private brokerStalledSince: number | null | undefined = undefined;
  private pausedSince: number | null = null;
  private pausedTotal = 0;
  /** The time of the latest report (or start): as of when the watch knows what it knows. */
  lastSeen: number;

  constructor(
    private readonly durableOnly: boolean,
    now: number,
  ) {
    this.lastProgressAt = now;
    this.clockFrom = now;
    this.lastSeen = now;
  }

  /** A new attempt (a learner added again): the stall clock and the paused time start over. */
  restart(now: number): void {
    this.lastSeen = Math.max(this.lastSeen, now);
    this.lastProgressAt = now;
    this.clockFrom = now;
    this.pausedTotal = 0;
    if (this.pausedSince !== null) this.pausedSince = now;
  }

  note(r: TargetReport, now: number): void {
    this.lastSeen = Math.max(this.lastSeen, now);
    let progressed = r.durableOffset > this.durable;
    this.durable = Math.max(this.durable, r.durableOffset);
    if (!this.durableOnly) {
      progressed ||= r.bytesRemaining < this.leastBytes;
      this.leastBytes = Math.min(this.leastBytes, r.bytesRemaining);
      if (r.phase !== undefined) {
        progressed ||= PHASE_ORDER[r.phase] > this.phase;
        this.phase = Math.max(this.phase, PHASE_ORDER[r.phase]);
      }
    }
    if (progressed) this.lastProgressAt = now;
    if (r.stalledSince !== undefined) {
      // While one stall lasts, keep its earliest start (a read's stalledSince is more exact than an event's).
      this.brokerStalledSince =
        r.stalledSince === null ? null : Math.min(r.stalledSince, this.brokerStalledSince ?? Infinity);
    }
    const paused = r.pausedForRecovery === true;
    if (paused && this.pausedSince === null) this.pausedSince = now;
    if (!paused && this.pausedSince !== null) {
      this.pausedTotal += now - this.pausedSince;
      this.pausedSince = null;
      this.clockFrom = Math.max(this.clockFrom, now);
    }
  }

  get paused(): boolean {
    return this.pausedSince !== null;
  }

  /** The broker says the transfer is stalled (never while it is paused for recovery). */
  get stalledAtBroker(): boolean {
    return typeof this.brokerStalledSince === 'number' && !this.paused;
  }

  /** How long the transfer has been stalled, by the broker's word where it gives one. */
  stalledFor(now: number): number {
    if (this.durableOnly) return now - this.lastProgressAt;
    if (this.paused) return 0;
    const since = this.brokerStalledSince === undefined ? this.lastProgressAt : this.brokerStalledSince;
    return since === null ? 0 : Math.max(0, now - Math.max(since, this.clockFrom));
  }

  /**
   * When the stall going on now began, as counted (never before the attempt's start or the end of the last
   * pause); null while the transfer progresses by the broker's word or is paused. Equal values mean the same stall.
   */
  stallStart(): number | null {
    if (this.durableOnly) return this.lastProgressAt;
    if (this.paused) return null;
    const since = this.brokerStalledSince === undefined ? this.lastProgressAt : this.brokerStalledSince;
    return since === null ? null : Math.max(since, this.clockFrom);
  }

  /** Time paused for recovery in this attempt: it extends the catch-up deadline. */
  pausedFor(now: number): number {
    if (this.durableOnly) return 0;
    return this.pausedTotal + (this.pausedSince === null ? 0 : now - this.pausedSince);
  }
}

/**
 * What a refused `remove-leaving` means for a move past the swap. Passing refusals go away by themselves
 * (a generation race, an injected fault, T not yet durable at B, a pending recovery, a rejoin in flight, a
 * handoff holding admission closed); `target_down` waits for T (R stays eligible meanwhile); `not_leaving`
 * checks whether the removal already happened; anything else cannot pass by itself and ends the move.
 */
export type RemovalRefusal = 'passing' | 'target_down' | 'not_leaving' | 'final';

const REMOVAL_PASSING = new Set([
  'generation_mismatch',
  'injected',
  'boundary_not_covered',
  'pending_recovery',
  'change_in_flight',
  'admission_closed',
]);

export function classifyRemovalRefusal(refusal: { code: string; saw: Record<string, unknown> }, target: string): RemovalRefusal {
  if (refusal.code === 'not_leaving') return 'not_leaving';
  // node_down naming T: T may come back. Naming any other node, no waiting brings it back into this move.
  if (refusal.code === 'node_down') return (refusal.saw['node'] ?? target) === target ? 'target_down' : 'final';
  return REMOVAL_PASSING.has(refusal.code) ? 'passing' : 'final';
}
