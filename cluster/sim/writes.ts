/**
 * The guarded writes, one function per write of the contract, each refusing (with what it saw) unless its
 * preconditions hold. Each `holds(...)` names the rule (cluster/sim/mutants.ts) a mutation test may remove.
 */
import { writeRequirement, type GuardedWriteName, type GuardedWriteRequest, type RefusalCode, type WriteReply } from '../contract';
import { checkPartition } from './invariants';
import type { MutantName } from './mutants';
import type { ClusterSim } from './sim';
import { materialize, wake, tryAnchor } from './anchor';
import { rebalanceRoom, takeSlot, releaseSlot } from './sync-budget';
import { partitionRecord, stateOf, roleOf } from './views';
import { newReplica, type PartitionState, type ReplicaState } from './types';

class Refused {
  constructor(
    readonly code: RefusalCode,
    readonly message: string,
    readonly saw: Record<string, unknown>,
  ) {}
}

/** One guarded write: the preconditions, then the change, a new generation and the safety check; a refusal leaves the partition as it was. */
export function write<N extends GuardedWriteName>(sim: ClusterSim, partitionId: string, name: N, req: GuardedWriteRequest<N>): WriteReply {
  const p = sim.partition(partitionId);
  materialize(sim, p);
  try {
    const wBefore = p.writeRequirement;
    const boundary = apply(sim, p, name, req as GuardedWriteRequest<GuardedWriteName>);
    sim.bump(p);
    sim.emit({ type: 'assignment_changed', partition: p.id, write: name, generation: p.generation });
    if (name !== 'promote-learner' && p.writeRequirement !== wBefore) {
      sim.recordBreach(
        {
          invariant: 3,
          partition: p.id,
          offset: null,
          detail: `${name} changed W from ${wBefore} to ${p.writeRequirement}`,
          state: stateOf(sim, p),
        },
        `3:${p.id}:${p.generation}`,
      );
    }
    checkPartition(sim, p, sim.sink, name);
    wake(sim, p);
    tryAnchor(sim, p);
    return { ok: true, write: name, partition: partitionRecord(sim, p), boundary };
  } catch (e) {
    if (e instanceof Refused) {
      return { ok: false, write: name, refusal: { code: e.code, message: e.message, saw: e.saw } };
    }
    throw e;
  }
}

/** The preconditions every write shares (note, steps 0 to 2: no pending recovery, the assignment still the committed one). */
function apply(sim: ClusterSim, p: PartitionState, name: GuardedWriteName, req: GuardedWriteRequest<GuardedWriteName>): number | null {
  if (!sim.holds('write.queue-only', p.kind === 'queue')) {
    throw new Refused('not_a_queue', `${p.id} is a stream; moves apply to queues only`, { kind: p.kind });
  }
  const inj = sim.injections.findIndex(
    (i) => (i.partition === undefined || i.partition === p.id) && (i.write === undefined || i.write === name),
  );
  if (inj >= 0) {
    sim.injections.splice(inj, 1);
    throw new Refused('injected', `refused by an injected fault (refuse-next-write)`, { fault: 'refuse-next-write' });
  }
  if (!sim.holds('write.no-pending-recovery', p.pendingRecovery === null)) {
    throw new Refused('pending_recovery', `${p.id} has a pending recovery; guarded writes wait for activation`, {
      ...p.pendingRecovery,
    });
  }
  if (!sim.holds('write.generation-matches', req.expectedGeneration === p.generation)) {
    throw new Refused(
      'generation_mismatch',
      `expected generation ${req.expectedGeneration} but ${p.id} is at ${p.generation}; re-read and retry`,
      { expected: req.expectedGeneration, current: p.generation },
    );
  }
  // Nothing changes who counts while admission is closed for a handoff (W, counted copies, eligible set).
  const handoff = name === 'commit-owner' || name === 'reopen-admission';
  if (!sim.holds('write.admission-open', handoff || p.admission === 'open')) {
    throw new Refused('admission_closed', `${p.id} has admission closed for an owner handoff; only commit-owner and reopen-admission are accepted`, {
      admission: p.admission,
      finalBoundary: p.finalBoundary,
    });
  }
  switch (name) {
    case 'add-learner':
      return addLearner(sim, p, (req as GuardedWriteRequest<'add-learner'>).node);
    case 'drop-learner':
      return dropLearner(sim, p, (req as GuardedWriteRequest<'drop-learner'>).node);
    case 'swap': {
      const r = req as GuardedWriteRequest<'swap'>;
      if (p.leaving !== null && r.learner === p.leaving) return swapBack(sim, p, r.learner, r.leaving);
      return swap(sim, p, r.learner, r.leaving);
    }
    case 'remove-leaving':
      return removeLeaving(sim, p, (req as GuardedWriteRequest<'remove-leaving'>).node);
    case 'promote-learner':
      return promoteLearner(sim, p, (req as GuardedWriteRequest<'promote-learner'>).node);
    case 'close-admission':
      return closeAdmission(sim, p);
    case 'commit-owner': {
      const r = req as GuardedWriteRequest<'commit-owner'>;
      return commitOwner(sim, p, r.newOwner, r.certificate);
    }
    case 'reopen-admission':
      return reopenAdmission(sim, p);
  }
}

/** Step 0: T joins as a learner, which never counts toward confirms nor changes W; T must be a registered, live process with room in the sync budget. */
function addLearner(sim: ClusterSim, p: PartitionState, n: string): null {
  const node = sim.nodes.get(n);
  if (!sim.holds('add-learner.known-node', !!node)) throw new Refused('unknown_node', `no node ${n} is registered`, { node: n });
  if (!sim.holds('add-learner.node-live', node?.live === true)) throw new Refused('node_down', `${n} is down`, { node: n, live: false });
  if (!sim.holds('add-learner.not-draining', node?.draining !== true)) {
    throw new Refused('node_draining', `${n} is draining`, { node: n, draining: true });
  }
  const role = roleOf(p, n);
  if (!sim.holds('add-learner.not-a-replica', role === null)) {
    throw new Refused('already_a_replica', `${n} is already the ${role} of ${p.id}`, { node: n, role });
  }
  if (!sim.holds('add-learner.one-change', p.learners.length === 0 && !p.leaving)) {
    throw new Refused('change_in_flight', `${p.id} already has a change in flight`, {
      learners: p.learners,
      leaving: p.leaving,
    });
  }
  const c = sim.config;
  const { room, inUse, waiting } = rebalanceRoom(sim, n);
  if (!sim.holds('add-learner.sync-budget', room)) {
    throw new Refused('no_sync_budget', `no transfer slot for ${n}: recovery first, then the per-node and cluster limits`, {
      node: n,
      inUse,
      limit: c.perNodeLimit,
      clusterInUse: sim.clusterInUse,
      clusterLimit: c.clusterLimit,
      recoveryWaiting: waiting,
    });
  }
  const retained = p.retainedCopies.find((rc) => rc.node === n && rc.storageInstance === node?.storageInstance);
  const r = newReplica(retained ? Math.min(retained.safeOffset, p.tail) : 0);
  r.slot = 'rebalance';
  takeSlot(sim, n);
  p.replicas[n] = r;
  p.learners.push(n);
  if (retained) p.retainedCopies = p.retainedCopies.filter((rc) => rc !== retained);
  return null;
}

/** Aborts: "if T fails before step 1, drop the learner"; nothing about the confirm contract changed, its data stays as a retained copy. */
function dropLearner(sim: ClusterSim, p: PartitionState, n: string): null {
  removeReplica(sim, p, n, requireLearner(sim, p, n, 'drop-learner.is-learner'));
  return null;
}

/** Step 1: T, admitted and caught up close to the tail, starts counting in R's place; R is leaving, B is the confirmed tail at the switch. */
function swap(sim: ClusterSim, p: PartitionState, learner: string, leaving: string): number {
  const r = requireLearner(sim, p, learner, 'swap.is-learner');
  // A failed target never starts to count ("if T fails before step 1, drop the learner").
  if (!sim.holds('swap.learner-live', sim.nodes.get(learner)!.live)) {
    throw new Refused('node_down', `${learner} is down; drop the learner rather than make it count`, { node: learner, live: false });
  }
  requireAdmittedCaughtUp(sim, p, learner, r, { admitted: 'swap.learner-admitted', caughtUp: 'swap.learner-caught-up', coverConfirmed: false });
  if (!sim.holds('swap.leaving-is-follower', p.followers.includes(leaving) && leaving !== p.owner)) {
    throw new Refused('not_a_follower', `${leaving} is not a follower of ${p.id}`, {
      node: leaving,
      owner: p.owner,
      followers: p.followers,
    });
  }
  if (!sim.holds('swap.one-change', !p.leaving)) {
    throw new Refused('change_in_flight', `${p.leaving} is already leaving ${p.id}`, { leaving: p.leaving });
  }
  p.learners = p.learners.filter((x) => x !== learner);
  p.followers = p.followers.map((f) => (f === leaving ? learner : f));
  p.leaving = leaving;
  p.boundary = { offset: p.confirmedTail, joined: learner, leaving, epoch: p.epoch };
  return p.confirmedTail;
}

/**
 * The swap back (docs/operations/follower-move.md, "Swap back when T is lost after the swap"), the way out when T is
 * lost after step 1: the leaving R counts again and T, the replica that joined in R's place, is leaving; B' is the
 * confirmed tail now. Safe by step 2's argument: the counted set is the old one again (everything below B is on W of
 * its copies), every message in [B, B') is on W copies of the set with T, at most one of them T, and T is removed
 * only once R covers B'.
 */
function swapBack(sim: ClusterSim, p: PartitionState, leaving: string, joined: string): number {
  const b = p.boundary;
  if (!b || b.leaving !== leaving || b.joined !== joined || !p.followers.includes(joined)) {
    throw new Refused('not_a_follower', `${joined} is not the replica that joined in ${leaving}'s place; a swap back names it as the one leaving`, {
      node: joined,
      leaving,
      joined: b?.joined ?? null,
    });
  }
  // R counts again only as any joining replica would: live, admitted and caught up close to the tail.
  if (!sim.holds('swap.learner-live', sim.nodes.get(leaving)!.live)) {
    throw new Refused('node_down', `${leaving} is down; it cannot count again`, { node: leaving, live: false });
  }
  requireAdmittedCaughtUp(sim, p, leaving, p.replicas[leaving]!, { admitted: 'swap.learner-admitted', caughtUp: 'swap.learner-caught-up', coverConfirmed: false });
  p.followers = p.followers.map((f) => (f === joined ? leaving : f));
  p.leaving = joined;
  p.boundary = { offset: p.confirmedTail, joined: leaving, leaving: joined, epoch: p.epoch, swappedBack: true };
  return p.confirmedTail;
}

/** Step 2: R leaves the assignment and the eligible set once T is durable at or beyond B, with no other admission in flight. */
function removeLeaving(sim: ClusterSim, p: PartitionState, n: string): null {
  const removed = p.replicas[n];
  if (!removed || n === p.owner || !sim.holds('remove-leaving.is-leaving', p.leaving === n) || !p.boundary) {
    throw new Refused('not_leaving', `${n} is not the leaving replica of ${p.id}`, { node: n, leaving: p.leaving });
  }
  const b = p.boundary;
  // R stays eligible while T is down ("until T returns or recovery resolves the partition").
  if (!sim.holds('remove-leaving.joined-live', sim.nodes.get(b.joined)?.live === true)) {
    throw new Refused('node_down', `${b.joined}, the replica that joined in ${n}'s place, is down; ${n} stays until it returns`, {
      node: b.joined,
      live: false,
    });
  }
  const joinedDurable = p.replicas[b.joined]?.durable ?? 0;
  const covered = joinedDurable >= b.offset;
  if (!sim.holds(b.swappedBack ? 'remove-leaving.swap-back-covered' : 'remove-leaving.boundary-covered', covered)) {
    throw new Refused(
      'boundary_not_covered',
      `${b.joined} is durable at ${joinedDurable}, below the switch boundary ${b.offset}`,
      { boundary: b.offset, durable: joinedDurable, joined: b.joined },
    );
  }
  // An admission in flight is a replica actually rejoining: suspended and live (holding a recovery slot or
  // waiting for one), so it may re-enter the history at any moment. Not R itself: removing it is the point.
  // Not a suspended replica whose node is down: it can rejoin only after its node returns, so waiting for it
  // could block the partition forever. Removing R next to such a replica is safe: a suspended replica never
  // counts toward a confirm, so the confirm sets of step 2's argument (W copies of the old set below B, with T
  // standing in for R; W counted copies of the new set above it) do not depend on it, and it stays in the
  // eligible set E with its disk, so a recovery sealing E - W + 1 of E still meets every confirm set.
  const rejoining = p.history
    .filter((h) => h.suspended && h.node !== n && sim.nodes.get(h.node)!.live)
    .map((h) => h.node);
  if (!sim.holds('remove-leaving.no-admission-in-flight', p.learners.length === 0 && rejoining.length === 0)) {
    throw new Refused('change_in_flight', `${p.id} has an admission in flight`, { learners: p.learners, rejoining });
  }
  // A self-report: reachable only when a test removed the boundary check (the checker sees the loss itself).
  if (!covered) {
    sim.recordBreach(
      {
        invariant: 4,
        partition: p.id,
        offset: joinedDurable,
        detail: `removed ${n} while ${b.joined} was durable at ${joinedDurable}, below the boundary ${b.offset}`,
        state: stateOf(sim, p),
      },
      `4:${p.id}:${p.generation}`,
    );
  }
  removeReplica(sim, p, n, removed);
  return null;
}

/** Replication factor increase (step 0, then promotion, no removal): the only write that changes W; confirms below it keep the old W. */
function promoteLearner(sim: ClusterSim, p: PartitionState, n: string): null {
  const r = requireLearner(sim, p, n, 'promote-learner.is-learner');
  // W rises with the factor only when the new copy starts to count, and a down learner counts for nothing.
  if (!sim.holds('promote-learner.learner-live', sim.nodes.get(n)!.live)) {
    throw new Refused('node_down', `${n} is down; drop the learner rather than raise W for a copy that cannot count`, { node: n, live: false });
  }
  requireAdmittedCaughtUp(sim, p, n, r, {
    admitted: 'promote-learner.learner-admitted',
    caughtUp: 'promote-learner.covers-confirmed',
    coverConfirmed: true,
  });
  if (!sim.holds('promote-learner.max-replication-factor', p.replicationFactor < 16)) {
    throw new Refused('above_maximum', `${p.id} is at the maximum replication factor 16`, {
      replicationFactor: p.replicationFactor,
    });
  }
  p.segments.push({ upTo: p.confirmedTail, w: p.writeRequirement });
  p.learners = p.learners.filter((x) => x !== n);
  p.followers.push(n);
  p.replicationFactor++;
  p.writeRequirement = writeRequirement(p.durability, p.replicationFactor);
  return null;
}

/** Owner handoff: at a quiet point the owner stops admitting work and reports its final boundary; W, counted copies and the eligible set stay. */
function closeAdmission(sim: ClusterSim, p: PartitionState): number {
  if (!sim.holds('close-admission.owner-live', sim.nodes.get(p.owner)!.live)) {
    throw new Refused('node_down', `owner ${p.owner} is down`, { node: p.owner });
  }
  if (!sim.holds('close-admission.no-change-in-flight', p.learners.length === 0 && !p.leaving)) {
    throw new Refused('change_in_flight', `${p.id} has a move in flight`, { learners: p.learners, leaving: p.leaving });
  }
  p.admission = 'closed';
  p.finalBoundary = p.tail;
  sim.emit({ type: 'admission_closed', partition: p.id, finalBoundary: p.tail });
  return p.tail;
}

/** Owner handoff: a live, counted follower becomes owner at epoch + 1 with a certificate once every counted copy holds the final boundary. */
function commitOwner(sim: ClusterSim, p: PartitionState, newOwner: string, cert: { finalBoundary: number; epoch: number }): null {
  if (!sim.holds('commit-owner.admission-closed', p.admission === 'closed' && p.finalBoundary !== null)) {
    throw new Refused('admission_open', `${p.id} has admission open; close it first`, { admission: p.admission });
  }
  if (!sim.holds('commit-owner.certificate-matches', cert.epoch === p.epoch && cert.finalBoundary === p.finalBoundary)) {
    throw new Refused('certificate_mismatch', `the certificate does not match epoch ${p.epoch} and final boundary ${p.finalBoundary}`, {
      epoch: p.epoch,
      finalBoundary: p.finalBoundary,
      certificate: cert,
    });
  }
  const h = p.history.find((e) => e.node === newOwner);
  if (!(newOwner in p.replicas) || !sim.holds('commit-owner.counted-follower', p.followers.includes(newOwner) && !!h && !h.suspended)) {
    throw new Refused('not_a_follower', `${newOwner} is not a counted follower of ${p.id}`, {
      node: newOwner,
      followers: p.followers,
      suspended: h?.suspended ?? false,
    });
  }
  if (!sim.holds('commit-owner.new-owner-live', sim.nodes.get(newOwner)!.live)) {
    throw new Refused('node_down', `${newOwner} is down`, { node: newOwner });
  }
  const fb = p.finalBoundary ?? p.tail;
  const lagging = [p.owner, ...p.followers]
    .filter((n) => n === p.owner || countsNow(sim, p, n))
    .map((n) => ({ node: n, durable: p.replicas[n]!.durable }))
    .filter((x) => x.durable < fb);
  if (!sim.holds('commit-owner.counted-caught-up', lagging.length === 0)) {
    throw new Refused('not_caught_up', `counted copies are not all durable at the final boundary ${fb}`, {
      finalBoundary: fb,
      lagging,
    });
  }
  const old = p.owner;
  p.followers = p.followers.map((f) => (f === newOwner ? old : f));
  p.owner = newOwner;
  p.tail = p.replicas[newOwner]!.durable;
  p.epoch++;
  return null;
}

/** Owner handoff: a failure before the commit cancels the handoff and the owner reopens admission. */
function reopenAdmission(sim: ClusterSim, p: PartitionState): null {
  if (!sim.holds('reopen-admission.admission-closed', p.admission === 'closed')) {
    throw new Refused('admission_open', `${p.id} already has admission open`, { admission: 'open' });
  }
  p.admission = 'open';
  p.finalBoundary = null;
  sim.emit({ type: 'admission_reopened', partition: p.id });
  return null;
}

/** The mutant lets a follower through, never the owner, the leaving replica or a node holding no replica. */
function requireLearner(sim: ClusterSim, p: PartitionState, n: string, rule: MutantName): ReplicaState {
  const r = p.replicas[n];
  if (!r || n === p.owner || n === p.leaving || !sim.holds(rule, p.learners.includes(n))) {
    throw new Refused('not_a_learner', `${n} is not a learner of ${p.id}`, { node: n, learners: p.learners });
  }
  return r;
}

function requireAdmittedCaughtUp(
  sim: ClusterSim,
  p: PartitionState,
  n: string,
  r: ReplicaState,
  rules: { admitted: MutantName; caughtUp: MutantName; coverConfirmed: boolean },
): void {
  const { coverConfirmed } = rules;
  const h = p.history.find((e) => e.node === n);
  if (!sim.holds(rules.admitted, !!h && !h.suspended)) {
    throw new Refused('not_admitted', `${n} is not (yet) admitted to the accepted history of ${p.id}`, {
      node: n,
      suspended: h?.suspended ?? false,
    });
  }
  const slack = sim.config.catchUpSlack;
  const behind = p.tail - r.durable > slack;
  if (!sim.holds(rules.caughtUp, !behind && !(coverConfirmed && r.durable < p.confirmedTail))) {
    throw new Refused(
      'not_caught_up',
      coverConfirmed
        ? `${n} must be durable at the confirmed tail ${p.confirmedTail} and within ${slack} of the tail ${p.tail}; it is at ${r.durable}`
        : `${n} is durable at ${r.durable}, more than ${slack} messages behind the tail ${p.tail}`,
      { node: n, durableOffset: r.durable, tail: p.tail, confirmedTail: p.confirmedTail, slack },
    );
  }
}

function countsNow(sim: ClusterSim, p: PartitionState, n: string): boolean {
  const h = p.history.find((e) => e.node === n);
  return !!h && !h.suspended && sim.nodes.get(n)!.live;
}

/** Takes n out of every role and the eligible set, keeping its data as a retained copy. */
function removeReplica(sim: ClusterSim, p: PartitionState, n: string, r: ReplicaState): void {
  p.learners = p.learners.filter((x) => x !== n);
  p.followers = p.followers.filter((x) => x !== n);
  p.history = p.history.filter((h) => h.node !== n);
  if (p.leaving === n) {
    p.leaving = null;
    p.boundary = null;
  }
  retain(sim, p, n, r);
}

function retain(sim: ClusterSim, p: PartitionState, n: string, r: ReplicaState): void {
  const node = sim.nodes.get(n)!;
  p.retainedCopies = p.retainedCopies.filter((c) => c.node !== n);
  const until = sim.now + sim.config.retainGraceMs;
  p.retainedCopies.push({
    node: n,
    durableOffset: r.durable,
    removedAt: sim.now,
    retainedUntil: until,
    safeOffset: Math.min(r.durable, p.confirmedTail),
    storageInstance: node.storageInstance,
  });
  sim.retainedQueue.push({ until, partition: p.id });
  releaseSlot(sim, n, r);
  delete p.replicas[n];
}
