/**
 * The safety checker (design.md, safety invariants). It runs after every change to a partition: a guarded
 * write, a fault, a recovery activation and every simulation step of a partition that is not anchored.
 * Holders of a message are monotone in its offset (a replica durable at d holds 0..d-1), so checking the top
 * message of each confirm segment covers the whole segment.
 */
import { writeRequirement, type Breach } from '../contract';
import type { PartitionState } from './types';

export interface BreachSink {
  check(): void;
  breach(b: Omit<Breach, 'at'>, key: string): void;
}

export interface CheckerHost {
  storageOf(node: string): string | undefined;
  stateOf(p: PartitionState): Record<string, unknown>;
}

/** Eligible holders of message `offset`: history members on their bound storage whose disk holds it. */
export function holders(host: CheckerHost, p: PartitionState, offset: number): string[] {
  const out: string[] = [];
  for (const h of p.history) {
    const r = p.replicas[h.node];
    if (r && r.durable > offset && host.storageOf(h.node) === h.storageInstance) out.push(h.node);
  }
  return out;
}

export function checkPartition(host: CheckerHost, p: PartitionState, sink: BreachSink, context: string): void {
  sink.check();
  const segs: { upTo: number; w: number }[] = [...p.segments, { upTo: p.confirmedTail, w: p.writeRequirement }];
  let from = 0;
  for (const seg of segs) {
    if (seg.upTo > from) {
      const o = seg.upTo - 1;
      const held = holders(host, p, o);
      // A disk lost after the message was confirmed excuses one copy (the fault budget), counted once per node.
      const lost = new Set(p.lostCopies.filter((l) => l.durableAtLoss > o && !held.includes(l.node)).map((l) => l.node));
      if (held.length + lost.size < seg.w) {
        sink.breach(
          {
            invariant: 1,
            partition: p.id,
            offset: o,
            detail: `after ${context}: confirmed message ${o} (confirmed under W=${seg.w}) is held by ${held.length} eligible replica(s) [${held.join(', ')}] plus ${lost.size} lost disk(s)`,
            state: host.stateOf(p),
          },
          `1:${p.id}:${o}`,
        );
      }
      if (held.length === 0) {
        sink.breach(
          {
            invariant: 2,
            partition: p.id,
            offset: o,
            detail: `after ${context}: confirmed message ${o} is on no eligible replica: lost (${lost.size} disk(s) lost)`,
            state: host.stateOf(p),
          },
          `2:${p.id}:${o}`,
        );
      }
    }
    from = Math.max(from, seg.upTo);
  }
  const owner = p.replicas[p.owner];
  // Outside a pending recovery the owner serves (or, down, is what recovery continues from): it must hold
  // every confirmed message, or new appends would reuse their offsets.
  if (p.pendingRecovery === null && owner && owner.durable < p.confirmedTail) {
    sink.breach(
      {
        invariant: 2,
        partition: p.id,
        offset: owner.durable,
        detail: `after ${context}: the owner ${p.owner} holds up to ${owner.durable}, below the confirmed tail ${p.confirmedTail}: confirmed messages lost`,
        state: host.stateOf(p),
      },
      `2:${p.id}:owner:${p.epoch}`,
    );
  }
  if (p.writeRequirement !== writeRequirement(p.durability, p.replicationFactor)) {
    sink.breach(
      {
        invariant: 3,
        partition: p.id,
        offset: null,
        detail: `after ${context}: W is ${p.writeRequirement}, not the ${writeRequirement(p.durability, p.replicationFactor)} the replication factor gives`,
        state: host.stateOf(p),
      },
      `3:${p.id}:w:${p.generation}`,
    );
  }
  if (p.learners.some((l) => l === p.owner || p.followers.includes(l) || l === p.leaving)) {
    sink.breach(
      {
        invariant: 3,
        partition: p.id,
        offset: null,
        detail: `after ${context}: a learner is also a counted replica`,
        state: host.stateOf(p),
      },
      `3:${p.id}:learner:${p.generation}`,
    );
  }
  const inFlight = p.learners.length + (p.leaving ? 1 : 0);
  let rejoining = 0;
  for (const h of p.history) if (h.suspended && p.replicas[h.node]?.slot) rejoining++;
  if (inFlight > 1 || rejoining > Math.max(1, p.writeRequirement - 1)) {
    sink.breach(
      {
        invariant: 5,
        partition: p.id,
        offset: null,
        detail: `after ${context}: ${inFlight} admissions/removals and ${rejoining} rejoins in flight`,
        state: host.stateOf(p),
      },
      `5:${p.id}:${p.generation}`,
    );
  }
}

/** Before an activation installs newOwner at newTail: every confirmed message must be below newTail. */
export function checkActivation(host: CheckerHost, p: PartitionState, newOwner: string, newTail: number, sink: BreachSink): void {
  if (newTail >= p.confirmedTail) return;
  sink.breach(
    {
      invariant: 2,
      partition: p.id,
      offset: newTail,
      detail: `recovery activated ${newOwner} at ${newTail} but messages up to ${p.confirmedTail} were confirmed: confirmed messages lost`,
      state: host.stateOf(p),
    },
    `2:${p.id}:activation:${p.epoch}`,
  );
}
