/**
 * The contract's behaviour cases. Each takes a Harness and works only on partitions and nodes the suite
 * created for itself (through the test controls), so a run never touches what the broker held before. A case
 * declares the test controls it drives; one the broker does not offer makes it a skip with that reason. Under
 * a stepped clock a case advances time; under a wall clock it waits (polling with backoff) for the same
 * conditions. The harness cleans up after every case.
 *
 * The file is long because it is the catalogue: one case per refusal of every guarded write, plus the
 * scenarios, the feed and the HTTP behaviour; the shared machinery lives in harness.ts.
 */
import {
  writeRequirement,
  type ClusterEvent,
  type ControlName,
  type Partition,
  type SyncBudget,
  type WriteAccepted,
} from '../contract';
import { CheckFailed, Skip, WRITE_NAMES, check, checkEqual, plausibleBody, replicasOf, show } from './checks';
import type { Harness } from './harness';
import { applyChanges, driftBetween } from '../model';

export interface ConformanceCase {
  name: string;
  /** Test controls the case needs; a broker that lacks one gets the case skipped with that reason. */
  needs: readonly ControlName[];
  /** Only the contract's reads: the case runs against a production broker under --read-only. */
  readOnly: boolean;
  run(h: Harness): Promise<void>;
}

const cases: ConformanceCase[] = [];
/** Every case that writes works on partitions and nodes the suite creates for itself, and deletes afterwards. */
const OWN: ControlName[] = ['create-partition', 'join-node', 'delete-partition', 'delete-node'];
const F: ControlName = 'faults';
const P: ControlName = 'publish';

function conformance(name: string, needs: ControlName[], run: (h: Harness) => Promise<void>): void {
  cases.push({ name, needs: [...OWN, ...needs], readOnly: false, run });
}

function readCase(name: string, run: (h: Harness) => Promise<void>): void {
  cases.push({ name, needs: [], readOnly: true, run });
}

/** Sends writes only to a partition that does not exist: needs no control, but is not a read. */
function probeCase(name: string, run: (h: Harness) => Promise<void>): void {
  cases.push({ name, needs: [], readOnly: false, run });
}

// ---------------------------------------------------------------- scenario helpers

async function durableOf(h: Harness, partition: string, node: string): Promise<number> {
  const progress = await h.client.progress(partition);
  const r = progress.replicas.find((x) => x.node === node);
  if (r === undefined) throw new Error(`${node} has no progress on ${partition}`);
  return r.durableOffset;
}

/**
 * Add `node` as a learner, wait until the cluster admits it (event `admitted`), then until it follows the
 * owner closely (durable at the confirmed tail).
 */
async function admitLearner(h: Harness, p: Partition, node: string): Promise<Partition> {
  const cursor = await h.cursor();
  await h.accept(p.id, 'add-learner', { node });
  await h.advanceUntilEvent(
    `learner ${node} admitted on ${p.id}`,
    cursor,
    (e) => e.type === 'admitted' && e.partition === p.id && e.node === node,
    { stepMs: 500 },
  );
  await h.advanceUntil(`learner ${node} at the confirmed tail of ${p.id}`, async () => {
    const progress = await h.client.progress(p.id);
    return (progress.replicas.find((r) => r.node === node)?.durableOffset ?? -1) >= progress.confirmedTail;
  });
  const after = await h.record(p.id);
  check(after.learners.includes(node), `admitted learner ${node} stays in learners: ${show(after.learners)}`);
  check(
    after.history.some((x) => x.node === node && !x.suspended),
    `admitted learner ${node} joins the accepted history: ${show(after.history)}`,
  );
  checkEqual(after.writeRequirement, p.writeRequirement, 'W after admission');
  checkEqual(after.epoch, p.epoch, 'epoch after admission');
  checkEqual(after.owner, p.owner, 'owner after admission');
  return after;
}

/**
 * Add `node` as a learner whose transfer is stalled from the start, so that it stays unadmitted (and holds
 * its slot) however fast a wall clock runs.
 */
async function pendingLearner(h: Harness, partition: string, node: string): Promise<void> {
  await h.fault({ fault: 'stall-transfer', partition, node, stalled: true });
  await h.accept(partition, 'add-learner', { node });
  const r = await h.record(partition);
  check(!r.history.some((x) => x.node === node), `setup: ${node} not admitted on ${partition} yet`);
}

/**
 * Leave `node` behind the owner: stall its transfer, publish, and wait until the confirmed tail (counted
 * from the other copies) is `gap` past it. The caller unstalls it with `release`.
 */
async function leaveBehind(h: Harness, partition: string, node: string, gap = 5_000): Promise<void> {
  await h.fault({ fault: 'stall-transfer', partition, node, stalled: true });
  const stuckAt = await durableOf(h, partition, node);
  await h.publish(partition, gap);
  await h.advanceUntil(`confirmed tail of ${partition} ${gap} past stalled ${node}`, async () => {
    const progress = await h.client.progress(partition);
    return progress.confirmedTail >= stuckAt + gap;
  });
}

async function release(h: Harness, partition: string, node: string): Promise<void> {
  await h.fault({ fault: 'stall-transfer', partition, node, stalled: false });
}

/**
 * The swap's boundary is the confirmed tail when it switched: exactly the one read before under a stepped
 * clock, between the ones read before and after under a wall clock (publishes keep landing).
 */
async function checkBoundary(h: Harness, partition: string, boundary: number | null, tailBefore: number): Promise<number> {
  check(boundary !== null, 'swap reports boundary B');
  if (h.clock === 'stepped') {
    checkEqual(boundary, tailBefore, 'swap boundary = confirmed tail at the swap');
  } else {
    const tailAfter = (await h.client.progress(partition)).confirmedTail;
    check(
      boundary >= tailBefore && boundary <= tailAfter,
      `swap boundary ${boundary} is the confirmed tail at the swap (read ${tailBefore} before, ${tailAfter} after)`,
    );
  }
  return boundary;
}

/**
 * A partition past the swap: learner T counts, follower R is leaving, and T is held below the boundary
 * (its transfer stalled) so the removal cannot happen yet. `finish` completes the move.
 */
async function swapped(h: Harness, options: { isolated?: boolean } = {}) {
  const p = await h.quietQueue({ minFollowers: 2, isolated: options.isolated });
  const target = await h.spareNode();
  await admitLearner(h, p, target);
  await leaveBehind(h, p.id, target, 5);
  const leaving = p.followers[0]!;
  const tailBefore = (await h.client.progress(p.id)).confirmedTail;
  const swap = await h.accept(p.id, 'swap', { learner: target, leaving });
  const boundary = await checkBoundary(h, p.id, swap.boundary, tailBefore);
  return {
    p,
    target,
    leaving,
    boundary,
    async finish(): Promise<void> {
      await release(h, p.id, target);
      await h.advanceUntil(`${target} durable at the boundary`, async () => {
        return (await durableOf(h, p.id, target)) >= boundary;
      });
      await h.accept(p.id, 'remove-leaving', { node: leaving });
    },
  };
}

// ---------------------------------------------------------------- every write: shared preconditions

for (const write of WRITE_NAMES) {
  conformance(`${write}: a stream partition is refused not_a_queue`, [], async (h) => {
    const s = await h.stream();
    const spare = await h.spareNode();
    await h.refuse(s.id, write, plausibleBody(write, s, spare), 'not_a_queue');
    // Even a stale generation reports not_a_queue first: streams are out of scope whatever the caller read.
    await h.refuse(s.id, write, plausibleBody(write, s, spare), 'not_a_queue', {
      expectedGeneration: s.generation + 1000,
    });
  });

  conformance(`${write}: a stale generation is refused generation_mismatch`, [], async (h) => {
    const p = await h.quietQueue();
    const spare = await h.spareNode();
    const refused = await h.refuse(p.id, write, plausibleBody(write, p, spare), 'generation_mismatch', {
      expectedGeneration: p.generation + 1000,
    });
    check(
      JSON.stringify(refused.refusal.saw).includes(String(p.generation)),
      `generation_mismatch says which generation it saw: ${show(refused.refusal.saw)}`,
    );
  });
}

conformance('pending recovery: every write is refused until activation, which bumps the epoch', [F], async (h) => {
  const p = await h.quietQueue({ minFollowers: 2 });
  const spare = await h.spareNode();
  const cursor = await h.cursor();
  await h.fault({ fault: 'fail-owner', partition: p.id });
  const fenced = await h.record(p.id);
  check(fenced.pendingRecovery !== null, `fail-owner opens a pending recovery on ${p.id}`);
  checkEqual(fenced.pendingRecovery.epoch, p.epoch, 'pending recovery names the failed epoch');
  checkEqual(fenced.pendingRecovery.failedOwner, p.owner, 'pending recovery names the failed owner');
  for (const write of WRITE_NAMES) {
    await h.refuse(p.id, write, plausibleBody(write, fenced, spare), 'pending_recovery');
  }
  // The pending recovery comes before the generation check: a stale caller still learns why.
  await h.refuse(p.id, 'add-learner', { node: spare }, 'pending_recovery', {
    expectedGeneration: fenced.generation + 1000,
  });
  const activated = await h.advanceUntilEvent(
    `recovery of ${p.id} activated`,
    cursor,
    (e) => e.type === 'recovery_activated' && e.partition === p.id,
  );
  const opened = (await h.eventsSince(cursor)).find((e) => e.type === 'recovery_opened' && e.partition === p.id);
  check(opened !== undefined, 'the feed carries recovery_opened before recovery_activated');
  check(opened.seq < activated.seq, 'recovery_opened precedes recovery_activated');
  const after = await h.record(p.id);
  checkEqual(after.pendingRecovery, null, 'pending recovery after activation');
  checkEqual(after.epoch, p.epoch + 1, 'epoch after activation');
  check(after.generation > fenced.generation, 'activation raises the generation');
  checkEqual(after.writeRequirement, p.writeRequirement, 'W after recovery');
  if (activated.type === 'recovery_activated') {
    checkEqual(activated.epoch, p.epoch + 1, 'recovery_activated epoch');
    checkEqual(activated.owner, after.owner, 'recovery_activated owner');
  }
  check(after.owner !== p.owner, `a replacement owner serves (was ${p.owner}, now ${after.owner})`);
  // Serving again: a guarded write is accepted under the new epoch.
  await h.accept(p.id, 'add-learner', { node: spare });
  await h.accept(p.id, 'drop-learner', { node: spare });
});

conformance('pending recovery: a learner never admitted does not hold recovery up and never counts', [F], async (h) => {
  const p = await h.quietQueue({ minFollowers: 2 });
  const spare = await h.spareNode();
  await pendingLearner(h, p.id, spare);
  const cursor = await h.cursor();
  await h.fault({ fault: 'fail-owner', partition: p.id });
  await h.advanceUntilEvent(
    `recovery of ${p.id} activated with a learner in flight`,
    cursor,
    (e) => e.type === 'recovery_activated' && e.partition === p.id,
  );
  const after = await h.record(p.id);
  check(after.owner !== spare, 'a learner never becomes the recovered owner');
  check(!after.followers.includes(spare), 'a learner never becomes a counted follower through recovery');
  checkEqual(after.epoch, p.epoch + 1, 'epoch after activation');
  checkEqual(after.writeRequirement, p.writeRequirement, 'W after recovery with a learner in flight');
  checkEqual(after.replicationFactor, p.replicationFactor, 'replication factor after recovery');
});

conformance('injected fault: refuse-next-write refuses one write injected, then writes pass', [F], async (h) => {
  const p = await h.quietQueue();
  const spare = await h.spareNode();
  await h.fault({ fault: 'refuse-next-write', partition: p.id, write: 'add-learner' });
  await h.refuse(p.id, 'add-learner', { node: spare }, 'injected');
  await h.accept(p.id, 'add-learner', { node: spare });
  await h.accept(p.id, 'drop-learner', { node: spare });
});

// ---------------------------------------------------------------- add-learner

conformance('add-learner: unknown node is refused unknown_node', [], async (h) => {
  const p = await h.quietQueue();
  await h.refuse(p.id, 'add-learner', { node: `no-such-node-${h.runId}` }, 'unknown_node');
});

conformance('add-learner: a down node is refused node_down', [F], async (h) => {
  const p = await h.quietQueue();
  const spare = await h.spareNode();
  await h.fault({ fault: 'crash-node', node: spare });
  await h.refuse(p.id, 'add-learner', { node: spare }, 'node_down');
});

conformance('downSince: a node reports the broker time it went down, null while live and again once restarted', [F], async (h) => {
  const node = await h.spareNode();
  // Read as sent, not through the client's schema, which fills an absent field in with null.
  const sent = async (): Promise<unknown> => {
    const reply = await h.raw('GET', '/v1/nodes');
    const found = (reply.json as { nodes?: { id: string; downSince?: unknown }[] } | undefined)?.nodes?.find((n) => n.id === node);
    check(found !== undefined && 'downSince' in found, `GET /v1/nodes lists ${node} with a downSince field: ${reply.text.slice(0, 300)}`);
    return found!.downSince;
  };
  checkEqual(await sent(), null, `${node} live: downSince`);
  const before = await h.now();
  await h.fault({ fault: 'crash-node', node });
  const after = await h.now();
  const since = await sent();
  check(typeof since === 'number' && since >= before && since <= after, `${node} down: downSince ${show(since)} is the broker time of the crash, within [${before}, ${after}]`);
  // How long a node has been down is read from here, so the mark must not move while it stays down.
  await h.elapse(50);
  checkEqual(await sent(), since, `${node} still down: downSince`);
  await h.fault({ fault: 'restart-node', node });
  checkEqual(await sent(), null, `${node} restarted: downSince`);
});

conformance('add-learner: a draining node is refused node_draining', [], async (h) => {
  const p = await h.quietQueue();
  const draining = await h.spareNode();
  await h.setDraining(draining, true);
  const node = (await h.client.topology()).nodes.find((n) => n.id === draining);
  checkEqual(node?.draining, true, `${draining} reported draining`);
  await h.refuse(p.id, 'add-learner', { node: draining }, 'node_draining');
});

conformance('draining: PUT /v1/nodes/{id}/draining sets and clears the mark, one node_draining event per change', [], async (h) => {
  const node = await h.spareNode();
  const cursor = await h.cursor();
  const reason = `conformance ${h.runId}`;
  checkEqual((await h.setDraining(node, true, reason)).draining, true, `${node} answered draining`);
  checkEqual((await h.setDraining(node, true)).draining, true, `${node} still draining after the same flag again`);
  checkEqual((await h.client.nodes()).nodes.find((n) => n.id === node)?.draining, true, `${node} draining in GET /v1/nodes`);
  checkEqual((await h.setDraining(node, false)).draining, false, `${node} answered no longer draining`);
  const missing = `no-such-node-${h.runId}`;
  const unknown = await h.raw('PUT', `/v1/nodes/${missing}/draining`, JSON.stringify({ draining: true }));
  checkEqual(unknown.status, 404, 'PUT draining on an unknown node');
  check(unknown.text.includes(missing), `the 404 names ${missing}: ${unknown.text.slice(0, 300)}`);
  const bad = await h.raw('PUT', `/v1/nodes/${node}/draining`, JSON.stringify({ draining: 'yes' }));
  checkEqual(bad.status, 400, 'PUT draining with a non-boolean flag');
  const events = (await h.eventsSince(cursor)).filter((e) => e.type === 'node_draining' && e.node === node);
  checkEqual(
    events.map((e) => (e.type === 'node_draining' ? { draining: e.draining, reason: e.reason } : null)),
    [
      { draining: true, reason },
      { draining: false, reason: null },
    ],
    `node_draining events for ${node}`,
  );
});

conformance('add-learner: the owner or a follower is refused already_a_replica', [], async (h) => {
  const p = await h.quietQueue();
  await h.refuse(p.id, 'add-learner', { node: p.owner }, 'already_a_replica');
  await h.refuse(p.id, 'add-learner', { node: p.followers[0]! }, 'already_a_replica');
});

conformance('add-learner: a second learner is refused change_in_flight', [], async (h) => {
  const p = await h.quietQueue();
  const first = await h.spareNode();
  await h.accept(p.id, 'add-learner', { node: first });
  const second = await h.spareNode([first]);
  await h.refuse(p.id, 'add-learner', { node: second }, 'change_in_flight');
  await h.refuse(p.id, 'add-learner', { node: first }, 'already_a_replica');
});

conformance('add-learner: a leaving replica in place is refused change_in_flight', [F, P], async (h) => {
  const s = await swapped(h);
  const other = await h.spareNode([s.target]);
  await h.refuse(s.p.id, 'add-learner', { node: other }, 'change_in_flight');
  await s.finish();
});

/**
 * The sync budget once at least `room` cluster-wide slots are free: earlier cases' rejoins finish on their
 * own; a broker that stays busier than that (other transfers) cannot host the case.
 */
async function budgetWithRoom(h: Harness, room: number): Promise<SyncBudget> {
  let budget = await h.client.syncBudget();
  try {
    await h.advanceUntil(
      `room for ${room} transfer(s) in the cluster sync budget`,
      async () => {
        budget = await h.client.syncBudget();
        return budget.clusterLimit - budget.clusterInUse >= room;
      },
      { maxMs: 120_000 },
    );
  } catch (err) {
    if (err instanceof CheckFailed) throw new Skip(`${err.message}: the broker is busy with other transfers`);
    throw err;
  }
  return budget;
}

conformance('add-learner: the per-node sync budget is refused no_sync_budget', [F], async (h) => {
  const target = await h.spareNode();
  const budget = await budgetWithRoom(h, (await h.client.syncBudget()).perNodeLimit);
  const parts = await h.quietQueues(budget.perNodeLimit + 1);
  for (const p of parts.slice(0, budget.perNodeLimit)) await pendingLearner(h, p.id, target);
  const after = await h.client.syncBudget();
  const mine = after.nodes.find((n) => n.node === target);
  checkEqual(mine?.inUse, budget.perNodeLimit, `sync budget in use on ${target}`);
  const refused = await h.refuse(parts.at(-1)!.id, 'add-learner', { node: target }, 'no_sync_budget');
  check(Object.keys(refused.refusal.saw).length > 0, 'no_sync_budget says what budget it saw');
});

conformance('add-learner: the cluster-wide sync budget is refused no_sync_budget', [F], async (h) => {
  const budget = await budgetWithRoom(h, (await h.client.syncBudget()).clusterLimit);
  const limit = budget.clusterLimit;
  const perNode = Math.max(1, budget.perNodeLimit);
  const parts = await h.quietQueues(limit + 1);
  const targets: string[] = [];
  for (let i = 0; i < limit; i += 1) {
    if (i % perNode === 0) targets.push(await h.spareNode(targets));
    await pendingLearner(h, parts[i]!.id, targets.at(-1)!);
  }
  checkEqual((await h.client.syncBudget()).clusterInUse, limit, 'cluster sync budget in use');
  const fresh = await h.spareNode(targets);
  await h.refuse(parts[limit]!.id, 'add-learner', { node: fresh }, 'no_sync_budget');
});

// ---------------------------------------------------------------- drop-learner

conformance('drop-learner: a follower is refused not_a_learner', [], async (h) => {
  const p = await h.quietQueue();
  await h.refuse(p.id, 'drop-learner', { node: p.followers[0]! }, 'not_a_learner');
  await h.refuse(p.id, 'drop-learner', { node: p.owner }, 'not_a_learner');
});

conformance('drop-learner: cancels a move without touching who counts', [], async (h) => {
  const p = await h.quietQueue();
  const spare = await h.spareNode();
  await h.accept(p.id, 'add-learner', { node: spare });
  const dropped = await h.accept(p.id, 'drop-learner', { node: spare });
  checkEqual(dropped.partition.learners, [], 'learners after drop');
  checkEqual(dropped.partition.followers, p.followers, 'followers after drop');
  checkEqual(dropped.partition.owner, p.owner, 'owner after drop');
  checkEqual(dropped.partition.writeRequirement, p.writeRequirement, 'W after drop');
  checkEqual(dropped.partition.epoch, p.epoch, 'epoch after drop');
  checkEqual(
    (await h.client.syncBudget()).transfers.filter((t) => t.partition === p.id),
    [],
    'transfers of the partition after drop',
  );
});

// ---------------------------------------------------------------- swap

conformance('swap: a node that is not a learner is refused not_a_learner', [], async (h) => {
  const p = await h.quietQueue({ minFollowers: 2 });
  const spare = await h.spareNode();
  await h.refuse(p.id, 'swap', { learner: spare, leaving: p.followers[0]! }, 'not_a_learner');
  await h.refuse(p.id, 'swap', { learner: p.followers[1]!, leaving: p.followers[0]! }, 'not_a_learner');
});

conformance('swap: a learner not yet admitted is refused not_admitted', [F], async (h) => {
  const p = await h.quietQueue();
  const spare = await h.spareNode();
  await pendingLearner(h, p.id, spare);
  await h.refuse(p.id, 'swap', { learner: spare, leaving: p.followers[0]! }, 'not_admitted');
});

conformance('swap: an admitted learner far behind the tail is refused not_caught_up', [F, P], async (h) => {
  const p = await h.quietQueue();
  const spare = await h.spareNode();
  await admitLearner(h, p, spare);
  await leaveBehind(h, p.id, spare);
  await h.refuse(p.id, 'swap', { learner: spare, leaving: p.followers[0]! }, 'not_caught_up');
});

conformance('swap: the owner or a non-replica as leaving is refused not_a_follower', [], async (h) => {
  const p = await h.quietQueue();
  const spare = await h.spareNode();
  await admitLearner(h, p, spare);
  await h.refuse(p.id, 'swap', { learner: spare, leaving: p.owner }, 'not_a_follower');
  const stranger = await h.spareNode([spare]);
  await h.refuse(p.id, 'swap', { learner: spare, leaving: stranger }, 'not_a_follower');
});

conformance('closed admission: every write but commit-owner and reopen-admission is refused admission_closed', [], async (h) => {
  // While admission is closed nothing may change who counts (the note): only the handoff's own writes pass.
  const p = await h.quietQueue({ minFollowers: 2 });
  const spare = await h.spareNode();
  await h.accept(p.id, 'close-admission', {});
  for (const write of WRITE_NAMES.filter((w) => w !== 'commit-owner' && w !== 'reopen-admission')) {
    await h.refuse(p.id, write, plausibleBody(write, p, spare), 'admission_closed');
  }
});

conformance('swap: boundary B is the confirmed tail, the learner counts and the old follower is leaving', [F, P], async (h) => {
  const s = await swapped(h);
  const after = await h.record(s.p.id);
  check(after.followers.includes(s.target), `${s.target} joins followers: ${show(after.followers)}`);
  check(!after.followers.includes(s.leaving), `${s.leaving} leaves followers: ${show(after.followers)}`);
  check(!after.learners.includes(s.target), `${s.target} leaves learners: ${show(after.learners)}`);
  checkEqual(after.leaving, s.leaving, 'leaving after swap');
  checkEqual(after.boundary?.offset, s.boundary, 'recorded switch boundary');
  checkEqual(after.boundary?.joined, s.target, 'boundary.joined');
  checkEqual(after.boundary?.leaving, s.leaving, 'boundary.leaving');
  checkEqual(after.writeRequirement, s.p.writeRequirement, 'W after swap');
  checkEqual(after.replicationFactor, s.p.replicationFactor, 'replication factor after swap');
  check(after.history.some((x) => x.node === s.leaving), 'the leaving replica stays in the eligible set');
  checkEqual((await h.client.progress(s.p.id)).boundary, s.boundary, 'progress reports the boundary');
  await s.finish();
});

conformance("swap back: the leaving R counts again, T that joined in its place is leaving, and T goes once R covers B'", [F, P], async (h) => {
  const s = await swapped(h);
  const other = s.p.followers.find((f) => f !== s.leaving);
  check(other !== undefined, 'setup: a second follower');
  // Only the replica that joined in R's place may be the one leaving in a swap back.
  await h.refuse(s.p.id, 'swap', { learner: s.leaving, leaving: other }, 'not_a_follower');
  const tailBefore = (await h.client.progress(s.p.id)).confirmedTail;
  const back = await h.accept(s.p.id, 'swap', { learner: s.leaving, leaving: s.target });
  const b2 = await checkBoundary(h, s.p.id, back.boundary, tailBefore);
  const after = await h.record(s.p.id);
  check(after.followers.includes(s.leaving) && !after.followers.includes(s.target), `${s.leaving} counts again, ${s.target} does not: ${show(after.followers)}`);
  checkEqual(after.leaving, s.target, 'leaving after the swap back');
  checkEqual(after.boundary?.joined, s.leaving, 'boundary.joined after the swap back');
  checkEqual(after.writeRequirement, s.p.writeRequirement, 'W after the swap back');
  check(after.history.some((x) => x.node === s.target), 'T stays in the eligible set until removed');
  await h.advanceUntil(`${s.leaving} durable at B' ${b2}`, async () => (await durableOf(h, s.p.id, s.leaving)) >= b2);
  await h.accept(s.p.id, 'remove-leaving', { node: s.target });
  const done = await h.record(s.p.id);
  check(done.leaving === null && !done.history.some((x) => x.node === s.target), `${s.target} removed: ${show(done)}`);
  await release(h, s.p.id, s.target);
});

// ---------------------------------------------------------------- remove-leaving

conformance('remove-leaving: a replica that is not leaving is refused not_leaving', [], async (h) => {
  const p = await h.quietQueue();
  await h.refuse(p.id, 'remove-leaving', { node: p.followers[0]! }, 'not_leaving');
  await h.refuse(p.id, 'remove-leaving', { node: p.owner }, 'not_leaving');
});

conformance('remove-leaving: before the joined replica covers the boundary it is refused boundary_not_covered', [F, P], async (h) => {
  const s = await swapped(h);
  const durable = await durableOf(h, s.p.id, s.target);
  check(durable < s.boundary, `setup: ${s.target} durable ${durable} below boundary ${s.boundary}`);
  const refused = await h.refuse(s.p.id, 'remove-leaving', { node: s.leaving }, 'boundary_not_covered');
  check(
    JSON.stringify(refused.refusal.saw).includes(String(s.boundary)),
    `boundary_not_covered says which boundary it saw: ${show(refused.refusal.saw)}`,
  );
  await s.finish();
});

conformance('remove-leaving: a suspended rejoin in flight is refused change_in_flight', [F, P], async (h) => {
  // Isolated: the restart below touches every partition on that node, and only this one may be touched.
  const s = await swapped(h, { isolated: true });
  const other = s.p.followers.find((f) => f !== s.leaving);
  check(other !== undefined, 'setup: a second follower');
  await release(h, s.p.id, s.target);
  await h.advanceUntil(`${s.target} covers the boundary`, async () => (await durableOf(h, s.p.id, s.target)) >= s.boundary);
  // Restarting a follower suspends it until learner admission takes it back: another change in flight. Its
  // transfer is stalled first so the rejoin cannot finish before the refusal is observed.
  await h.fault({ fault: 'stall-transfer', partition: s.p.id, node: other, stalled: true });
  await h.fault({ fault: 'crash-node', node: other });
  await h.fault({ fault: 'restart-node', node: other });
  const q = await h.record(s.p.id);
  check(q.history.some((x) => x.node === other && x.suspended), `restarting ${other} suspends it: ${show(q.history)}`);
  await h.refuse(s.p.id, 'remove-leaving', { node: s.leaving }, 'change_in_flight');
  await release(h, s.p.id, other);
  await h.advanceUntil(`${other} re-admitted`, async () => {
    const r = await h.record(s.p.id);
    return r.history.some((x) => x.node === other && !x.suspended);
  });
  await h.accept(s.p.id, 'remove-leaving', { node: s.leaving });
});

/** A wall-clock broker whose grace period is longer than this is not waited for (the case is skipped). */
const LONGEST_WALL_GRACE_MS = 120_000;

conformance('retained copy: a removed replica is reported until retainedUntil, then expires', [F, P], async (h) => {
  const s = await swapped(h);
  await s.finish();
  const view = await h.client.partition(s.p.id);
  const copy = view.partition.retainedCopies.find((c) => c.node === s.leaving);
  check(copy !== undefined, `${s.leaving} is a retained copy after removal`);
  check(copy.retainedUntil > copy.removedAt, `a grace period: ${show(copy)}`);
  const left = copy.retainedUntil - view.progress.now;
  check(left > 0, `the copy is retained until ${copy.retainedUntil}, after now (${view.progress.now})`);
  if (h.clock === 'stepped') {
    if (left > 1) await h.client.advance(left - 1);
    check(
      (await h.record(s.p.id)).retainedCopies.some((c) => c.node === s.leaving),
      'the copy is still retained just before retainedUntil',
    );
  } else if (left > LONGEST_WALL_GRACE_MS) {
    throw new Skip(`the grace period has ${left} ms left; the suite waits at most ${LONGEST_WALL_GRACE_MS} wall ms`);
  }
  let goneAt = 0;
  await h.advanceUntil(
    `${s.leaving}'s retained copy expires`,
    async () => {
      const v = await h.client.partition(s.p.id);
      goneAt = v.progress.now;
      return !v.partition.retainedCopies.some((c) => c.node === s.leaving);
    },
    { stepMs: 1_000, maxMs: left + 60_000 },
  );
  check(goneAt >= copy.retainedUntil, `the copy was kept until retainedUntil ${copy.retainedUntil} (gone at ${goneAt})`);
});

// ---------------------------------------------------------------- the whole follower move

conformance('follower move: add, admit, swap, wait for the boundary, remove; W never changes', [F, P], async (h) => {
  const p = await h.quietQueue({ minFollowers: 2 });
  const target = await h.spareNode();
  const w = p.writeRequirement;
  const cursor = await h.cursor();

  const added = await h.accept(p.id, 'add-learner', { node: target });
  checkEqual(added.partition.learners, [target], 'learners after add-learner');
  checkEqual(added.partition.writeRequirement, w, 'W after add-learner');
  checkEqual(added.partition.followers, p.followers, 'followers after add-learner');
  check(added.partition.generation > p.generation, 'add-learner raises the generation');
  const budget = await h.client.syncBudget();
  check(
    budget.transfers.some((t) => t.partition === p.id && t.node === target),
    `a transfer to ${target} is in the sync budget: ${show(budget.transfers)}`,
  );

  await h.publish(p.id, 100);
  const admitted = await h.advanceUntilEvent(
    `${target} admitted`,
    cursor,
    (e) => e.type === 'admitted' && e.partition === p.id && e.node === target,
    { stepMs: 500 },
  );
  await h.advanceUntil(`${target} at the confirmed tail`, async () => {
    const progress = await h.client.progress(p.id);
    return (progress.replicas.find((r) => r.node === target)?.durableOffset ?? -1) >= progress.confirmedTail;
  });
  const atAdmission = await h.record(p.id);
  checkEqual(atAdmission.writeRequirement, w, 'W after admission');
  check(atAdmission.history.some((x) => x.node === target), 'admission adds the learner to the accepted history');
  check(atAdmission.learners.includes(target), 'an admitted learner stays a learner until the swap');
  if (admitted.type === 'admitted') check(admitted.generation <= atAdmission.generation, 'admitted event generation');

  // Hold the new copy below the boundary so the removal guard is visible.
  await leaveBehind(h, p.id, target, 5);
  const leaving = p.followers[0]!;
  const tail = (await h.client.progress(p.id)).confirmedTail;
  const swap = await h.accept(p.id, 'swap', { learner: target, leaving });
  const boundary = await checkBoundary(h, p.id, swap.boundary, tail);
  checkEqual(swap.partition.writeRequirement, w, 'W after swap');
  checkEqual(swap.partition.leaving, leaving, 'leaving after swap');

  await h.refuse(p.id, 'remove-leaving', { node: leaving }, 'boundary_not_covered');
  await release(h, p.id, target);
  await h.advanceUntil(`${target} durable at ${boundary}`, async () => (await durableOf(h, p.id, target)) >= boundary);
  const removed = await h.accept(p.id, 'remove-leaving', { node: leaving });
  const r = removed.partition;
  checkEqual(r.leaving, null, 'leaving after remove');
  check(!replicasOf(r).includes(leaving), `${leaving} no longer assigned: ${show(replicasOf(r))}`);
  check(!r.history.some((x) => x.node === leaving), `${leaving} leaves the eligible set`);
  check(
    r.retainedCopies.some((c) => c.node === leaving && c.retainedUntil > c.removedAt),
    `${leaving} becomes a retained copy: ${show(r.retainedCopies)}`,
  );
  checkEqual(r.writeRequirement, w, 'W after remove');
  checkEqual(r.replicationFactor, p.replicationFactor, 'replication factor after remove');
  checkEqual(r.followers.length, p.followers.length, 'follower count after the move');
  checkEqual(r.owner, p.owner, 'owner after a follower move');
  checkEqual(r.epoch, p.epoch, 'epoch after a follower move');

  const moveEvents = (await h.eventsSince(cursor)).filter(
    (e): e is Extract<ClusterEvent, { type: 'assignment_changed' }> =>
      e.type === 'assignment_changed' && e.partition === p.id,
  );
  checkEqual(
    moveEvents.map((e) => e.write),
    ['add-learner', 'swap', 'remove-leaving'],
    'assignment_changed events of the move',
  );
  // The runner's breach check follows: give the invariant checker time after the move first.
  await h.elapse(1_000);
});

// ---------------------------------------------------------------- promote-learner

conformance('promote-learner: a follower or stranger is refused not_a_learner', [], async (h) => {
  const p = await h.quietQueue();
  await h.refuse(p.id, 'promote-learner', { node: p.followers[0]! }, 'not_a_learner');
  await h.refuse(p.id, 'promote-learner', { node: await h.spareNode() }, 'not_a_learner');
});

conformance('promote-learner: a learner not yet admitted is refused not_admitted', [F], async (h) => {
  const p = await h.quietQueue();
  const spare = await h.spareNode();
  await pendingLearner(h, p.id, spare);
  await h.refuse(p.id, 'promote-learner', { node: spare }, 'not_admitted');
});

conformance('promote-learner: an admitted learner far behind is refused not_caught_up', [F, P], async (h) => {
  const p = await h.quietQueue();
  const spare = await h.spareNode();
  await admitLearner(h, p, spare);
  await leaveBehind(h, p.id, spare);
  await h.refuse(p.id, 'promote-learner', { node: spare }, 'not_caught_up');
});

conformance('promote-learner: raises the replication factor by one and recomputes W', [], async (h) => {
  const p = await h.quietQueue();
  const spare = await h.spareNode();
  await admitLearner(h, p, spare);
  const promoted = await h.accept(p.id, 'promote-learner', { node: spare });
  const r = promoted.partition;
  checkEqual(r.replicationFactor, p.replicationFactor + 1, 'replication factor after promote');
  checkEqual(r.writeRequirement, writeRequirement(r.durability, r.replicationFactor), 'W after promote');
  check(r.followers.includes(spare), `${spare} counts after promote: ${show(r.followers)}`);
  check(!r.learners.includes(spare), `${spare} is no longer a learner`);
  checkEqual(r.leaving, null, 'promote removes nobody');
  checkEqual(r.owner, p.owner, 'owner after promote');
  await h.elapse(1_000);
});

// ---------------------------------------------------------------- owner handoff

/** Close admission and wait until every counted copy holds the final boundary. */
async function closeAndSettle(h: Harness, p: Partition): Promise<WriteAccepted> {
  const closed = await h.accept(p.id, 'close-admission', {});
  checkEqual(closed.partition.admission, 'closed', 'admission after close');
  check(closed.boundary !== null, 'close-admission reports a final boundary');
  const final = closed.boundary;
  await h.advanceUntil(`followers of ${p.id} durable at ${final}`, async () => {
    const progress = await h.client.progress(p.id);
    return progress.replicas.filter((x) => x.role === 'follower').every((x) => x.durableOffset >= final);
  });
  return closed;
}

conformance('close-admission: already closed is refused admission_closed', [], async (h) => {
  const p = await h.quietQueue();
  await h.accept(p.id, 'close-admission', {});
  await h.refuse(p.id, 'close-admission', {}, 'admission_closed');
});

conformance('close-admission: a learner in flight is refused change_in_flight', [], async (h) => {
  const p = await h.quietQueue();
  const spare = await h.spareNode();
  await h.accept(p.id, 'add-learner', { node: spare });
  await h.refuse(p.id, 'close-admission', {}, 'change_in_flight');
});

conformance('reopen-admission: an open admission is refused admission_open', [], async (h) => {
  const p = await h.quietQueue();
  await h.refuse(p.id, 'reopen-admission', {}, 'admission_open');
});

conformance('commit-owner: with admission open it is refused admission_open', [], async (h) => {
  const p = await h.quietQueue();
  const progress = await h.client.progress(p.id);
  await h.refuse(
    p.id,
    'commit-owner',
    { newOwner: p.followers[0]!, certificate: { finalBoundary: progress.confirmedTail, epoch: p.epoch } },
    'admission_open',
  );
});

conformance('commit-owner: a certificate that does not match is refused certificate_mismatch', [], async (h) => {
  const p = await h.quietQueue();
  const closed = await closeAndSettle(h, p);
  const final = closed.boundary ?? 0;
  const newOwner = p.followers[0]!;
  await h.refuse(
    p.id,
    'commit-owner',
    { newOwner, certificate: { finalBoundary: final + 1, epoch: p.epoch } },
    'certificate_mismatch',
  );
  await h.refuse(
    p.id,
    'commit-owner',
    { newOwner, certificate: { finalBoundary: final, epoch: p.epoch + 1 } },
    'certificate_mismatch',
  );
});

conformance('commit-owner: a new owner that is not a follower is refused not_a_follower', [], async (h) => {
  const p = await h.quietQueue();
  const closed = await closeAndSettle(h, p);
  const certificate = { finalBoundary: closed.boundary ?? 0, epoch: p.epoch };
  await h.refuse(p.id, 'commit-owner', { newOwner: await h.spareNode(), certificate }, 'not_a_follower');
  await h.refuse(p.id, 'commit-owner', { newOwner: p.owner, certificate }, 'not_a_follower');
});

conformance('commit-owner: a down follower is refused node_down', [F], async (h) => {
  // Isolated: the crash below touches every partition on that node, and only this one may be touched.
  const p = await h.quietQueue({ minFollowers: 2, isolated: true });
  const victim = p.followers[0]!;
  const closed = await closeAndSettle(h, p);
  await h.fault({ fault: 'crash-node', node: victim });
  await h.refuse(
    p.id,
    'commit-owner',
    { newOwner: victim, certificate: { finalBoundary: closed.boundary ?? 0, epoch: p.epoch } },
    'node_down',
  );
});

conformance('commit-owner: a follower below the final boundary is refused not_caught_up', [F, P], async (h) => {
  const p = await h.quietQueue({ minFollowers: 2 });
  const laggard = p.followers[0]!;
  // With one follower's replication stalled, the owner and the other follower still confirm.
  await leaveBehind(h, p.id, laggard, 5);
  const closed = await h.accept(p.id, 'close-admission', {});
  const final = closed.boundary ?? 0;
  const durable = await durableOf(h, p.id, laggard);
  check(durable < final, `setup: ${laggard} durable ${durable} below the final boundary ${final}`);
  await h.refuse(
    p.id,
    'commit-owner',
    { newOwner: laggard, certificate: { finalBoundary: final, epoch: p.epoch } },
    'not_caught_up',
  );
});

conformance('owner handoff: close admission, commit at epoch + 1, reopen; copies and W unchanged', [P], async (h) => {
  const p = await h.quietQueue();
  const newOwner = p.followers[0]!;
  await h.publish(p.id, 100);
  const closed = await closeAndSettle(h, p);
  const committed = await h.accept(p.id, 'commit-owner', {
    newOwner,
    certificate: { finalBoundary: closed.boundary ?? 0, epoch: p.epoch },
  });
  const c = committed.partition;
  checkEqual(c.owner, newOwner, 'owner after commit');
  checkEqual(c.epoch, p.epoch + 1, 'epoch after commit');
  check(c.followers.includes(p.owner), `the old owner stays on as a follower: ${show(c.followers)}`);
  check(!c.followers.includes(newOwner), 'the new owner is no longer listed as a follower');
  checkEqual(c.followers.length, p.followers.length, 'follower count after handoff');
  checkEqual(c.writeRequirement, p.writeRequirement, 'W after handoff');
  checkEqual(c.replicationFactor, p.replicationFactor, 'replication factor after handoff');
  checkEqual(c.pendingRecovery, null, 'no recovery for a planned handoff');
  const reopened = await h.accept(p.id, 'reopen-admission', {});
  checkEqual(reopened.partition.admission, 'open', 'admission after reopen');
  checkEqual(reopened.partition.epoch, p.epoch + 1, 'epoch after reopen');
  const before = (await h.client.progress(p.id)).tail;
  const published = await h.publish(p.id, 3);
  check(published.firstOffset >= before, `publishes append at the tail (${before}): ${show(published)}`);
  checkEqual(published.nextOffset, published.firstOffset + 3, 'three messages appended');
  const tail = (await h.client.progress(p.id)).tail;
  check(tail >= published.nextOffset, `the new owner appends publishes: tail ${tail} >= ${published.nextOffset}`);
  await h.elapse(1_000);
});

// ---------------------------------------------------------------- idempotency

conformance('idempotency: the same key again returns the first reply', [F], async (h) => {
  const p = await h.quietQueue();
  const spare = await h.spareNode();
  const key = h.key('retry');
  const request = { node: spare, expectedGeneration: p.generation, idempotencyKey: key };
  // Stalled, the learner is not admitted meanwhile (an admission would raise the generation).
  await h.fault({ fault: 'stall-transfer', partition: p.id, node: spare, stalled: true });
  const first = await h.client.write(p.id, 'add-learner', request);
  check(first.ok, `first add-learner accepted: ${show(first)}`);
  const second = await h.client.write(p.id, 'add-learner', request);
  checkEqual(second, first, 'retried reply');
  const now = await h.record(p.id);
  checkEqual(now.learners, [spare], 'a retry adds nothing');
  checkEqual(now.generation, first.partition.generation, 'a retry changes no generation');
  // A refusal is remembered too: the retry gets the same refusal even after the cause went away.
  const q = await h.quietQueue();
  const refusedKey = h.key('retry-refused');
  const refusedReq = { node: spare, expectedGeneration: q.generation + 1000, idempotencyKey: refusedKey };
  const refused = await h.client.write(q.id, 'add-learner', refusedReq);
  check(!refused.ok && refused.refusal.code === 'generation_mismatch', `setup refusal: ${show(refused)}`);
  checkEqual(await h.client.write(q.id, 'add-learner', refusedReq), refused, 'retried refusal');
});

conformance('idempotency: the same key with another body is rejected 422', [], async (h) => {
  const p = await h.quietQueue();
  const spare = await h.spareNode();
  const key = h.key('reuse');
  const path = `/v1/partitions/${encodeURIComponent(p.id)}/add-learner`;
  const first = await h.raw(
    'POST',
    path,
    JSON.stringify({ node: spare, expectedGeneration: p.generation + 1000, idempotencyKey: key }),
  );
  checkEqual(first.status, 409, 'first (stale) write status');
  const before = await h.settledRecord(p.id);
  const other = await h.raw(
    'POST',
    path,
    JSON.stringify({ node: p.owner, expectedGeneration: p.generation + 1000, idempotencyKey: key }),
  );
  checkEqual(other.status, 422, 'same key, other body: status');
  checkEqual(await h.settledRecord(p.id), before, 'partition after a 422');
  const again = await h.raw(
    'POST',
    path,
    JSON.stringify({ node: spare, expectedGeneration: p.generation + 1000, idempotencyKey: key }),
  );
  checkEqual(again.json, first.json, 'the original body still returns the first reply');
});

// ---------------------------------------------------------------- event feed

conformance('event feed: after=N returns only later events, in order, and the cursor resumes', [], async (h) => {
  const p = await h.quietQueue();
  const spare = await h.spareNode();
  const start = await h.cursor();
  await h.accept(p.id, 'add-learner', { node: spare });
  await h.accept(p.id, 'drop-learner', { node: spare });
  const page = await h.client.events(start);
  check(page.events.length >= 2, `two writes made >= 2 events, got ${page.events.length}`);
  for (const [i, e] of page.events.entries()) {
    check(e.seq > start, `event seq ${e.seq} > after=${start}`);
    if (i > 0) check(e.seq > page.events[i - 1]!.seq, `seq rises: ${page.events[i - 1]!.seq} then ${e.seq}`);
  }
  checkEqual(page.cursor, page.events.at(-1)!.seq, 'cursor = last seq returned');
  const writes = page.events.filter((e) => e.type === 'assignment_changed' && e.partition === p.id);
  checkEqual(
    writes.map((e) => (e.type === 'assignment_changed' ? e.write : null)),
    ['add-learner', 'drop-learner'],
    'assignment_changed events in order',
  );
  // Under a wall clock events keep arriving, so later reads may hold more at their end, never less or other.
  const wall = h.clock === 'wall';
  const mid = page.events[0]!.seq;
  const rest = await h.client.events(mid);
  checkEqual(
    wall ? rest.events.slice(0, page.events.length - 1) : rest.events,
    page.events.slice(1),
    'after=<first seq> returns the rest',
  );
  const limited = await h.client.events(start, { limit: 1 });
  checkEqual(limited.events, page.events.slice(0, 1), 'limit=1 returns the first event only');
  checkEqual(limited.cursor, page.events[0]!.seq, 'cursor after a limited page');
  const next = await h.client.events(page.cursor);
  if (!wall) checkEqual(next.events, [], 'nothing after the end');
  check(next.events.every((e) => e.seq > page.cursor), `events after the end come after cursor ${page.cursor}`);
  checkEqual(next.cursor, next.events.at(-1)?.seq ?? page.cursor, 'cursor after reading from the end');
});

conformance('event feed: a long-poll returns as soon as an event arrives', [], async (h) => {
  const p = await h.quietQueue();
  const spare = await h.spareNode();
  const start = await h.cursor();
  if (h.clock === 'stepped') {
    // Nothing happens on its own under a stepped clock: an idle long-poll waits out its time.
    const idleStart = Date.now();
    const idle = await h.client.events(start, { waitMs: 300 });
    const idleMs = Date.now() - idleStart;
    checkEqual(idle.events, [], 'long-poll with no event');
    check(idleMs >= 250, `an idle long-poll waits (${idleMs} ms for waitMs=300)`);
  }
  const ours = (e: ClusterEvent) => e.type === 'assignment_changed' && e.partition === p.id;
  // Under a wall clock other events may end a poll first: poll again from its cursor until ours arrives.
  const seenAt = (async () => {
    for (let cursor = start; ; ) {
      const page = await h.client.events(cursor, { waitMs: 20_000 });
      check(page.events.every((e) => e.seq > cursor), `long-poll events come after cursor ${cursor}`);
      if (page.events.some(ours)) return Date.now();
      cursor = page.cursor;
    }
  })();
  // Let the first poll reach the broker and wait before the event exists.
  await new Promise((resolve) => setTimeout(resolve, 200));
  const writtenAt = Date.now();
  await h.accept(p.id, 'add-learner', { node: spare });
  const took = (await seenAt) - writtenAt;
  check(took < 5_000, `the long-poll returned the event ${took} ms after the write, well before waitMs=20000`);
});

// ---------------------------------------------------------------- plain HTTP behaviour

/** Any well-formed record, to build bodies for a partition that does not exist. */
const placeholder: Partition = {
  id: 'p',
  kind: 'queue',
  owner: 'n0',
  followers: ['n1'],
  learners: [],
  leaving: null,
  epoch: 0,
  generation: 0,
  replicationFactor: 3,
  durability: { mode: 'majority_durable' },
  writeRequirement: 2,
  history: [],
  pendingRecovery: null,
  admission: 'open',
  boundary: null,
  retainedCopies: [],
  historyBytes: 0,
  publishRate: 0,
  deliveryRate: 0,
};

probeCase('unknown partition: reads and writes answer 404', async (h) => {
  const id = `no-such-partition-${h.runId}`;
  for (const path of [`/v1/partitions/${id}`, `/v1/partitions/${id}/progress`]) {
    const r = await h.raw('GET', path);
    checkEqual(r.status, 404, `GET ${path}`);
  }
  for (const write of WRITE_NAMES) {
    const body = { ...plausibleBody(write, placeholder, 'n0'), expectedGeneration: 0, idempotencyKey: h.key('404') };
    const r = await h.raw('POST', `/v1/partitions/${id}/${write}`, JSON.stringify(body));
    checkEqual(r.status, 404, `POST ${write} on an unknown partition`);
  }
});

conformance('malformed input: 400 bad_request naming the field, nothing changes', [], async (h) => {
  const p = await h.quietQueue();
  const before = await h.settledRecord(p.id);
  const path = `/v1/partitions/${encodeURIComponent(p.id)}/add-learner`;
  const bad: { body: string; field: string | null; contentType?: string }[] = [
    { body: '{"node": "x", "expectedGeneration": ', field: null },
    { body: JSON.stringify({ node: 'x', expectedGeneration: -1, idempotencyKey: 'k' }), field: 'expectedGeneration' },
    { body: JSON.stringify({ node: 7, expectedGeneration: 0, idempotencyKey: 'k' }), field: 'node' },
    { body: JSON.stringify({ node: 'x', expectedGeneration: 0 }), field: 'idempotencyKey' },
    { body: JSON.stringify({ node: 'x', expectedGeneration: 0, idempotencyKey: 'k', extra: 1 }), field: 'extra' },
    { body: JSON.stringify({ node: 'x', expectedGeneration: 1e300, idempotencyKey: 'k' }), field: 'expectedGeneration' },
  ];
  for (const b of bad) {
    const r = await h.raw('POST', path, b.body, b.contentType);
    checkEqual(r.status, 400, `status for ${b.body}`);
    const body = r.json as { error?: string; message?: string; issues?: { path: string; message: string }[] };
    checkEqual(body?.error, 'bad_request', `error for ${b.body}`);
    check(typeof body.message === 'string' && body.message.length > 0, `message for ${b.body}`);
    if (b.field !== null) {
      const named = (body.issues ?? []).some((i) => i.path.includes(b.field!)) || body.message!.includes(b.field);
      check(named, `the reply to ${b.body} names ${b.field}: ${r.text.slice(0, 300)}`);
    }
  }
  checkEqual(await h.settledRecord(p.id), before, 'partition record after bad requests');
});

// ---------------------------------------------------------------- OpenAPI

/**
 * The paths every implementation must describe, with path parameters written as `{}`: the contract's reads
 * and writes (the document itself need not be listed), and each test control the broker says it offers.
 */
const CONTRACT_PATHS: { path: string; method: 'get' | 'post' }[] = [
  { path: '/healthz', method: 'get' },
  { path: '/v1/topology', method: 'get' },
  { path: '/v1/topology/changes', method: 'get' },
  { path: '/v1/nodes', method: 'get' },
  { path: '/v1/partitions/{}', method: 'get' },
  { path: '/v1/partitions/{}/progress', method: 'get' },
  { path: '/v1/sync-budget', method: 'get' },
  { path: '/v1/events', method: 'get' },
  ...WRITE_NAMES.map((w) => ({ path: `/v1/partitions/{}/${w}`, method: 'post' as const })),
];
const CONTROL_PATHS: Record<ControlName, { path: string; method: 'get' | 'post' | 'delete' }[]> = {
  'advance-clock': [
    { path: '/v1/clock', method: 'get' },
    { path: '/v1/clock/advance', method: 'post' },
  ],
  faults: [{ path: '/v1/faults', method: 'post' }],
  publish: [{ path: '/v1/partitions/{}/publish', method: 'post' }],
  'set-rate': [{ path: '/v1/partitions/{}/rate', method: 'post' }],
  'join-node': [{ path: '/v1/nodes', method: 'post' }],
  'create-partition': [{ path: '/v1/partitions', method: 'post' }],
  'delete-partition': [{ path: '/v1/partitions/{}', method: 'delete' }],
  'delete-node': [{ path: '/v1/nodes/{}', method: 'delete' }],
  invariants: [{ path: '/v1/invariants', method: 'get' }],
};

readCase('openapi.json: a valid OpenAPI 3 document listing every path', async (h) => {
  const r = await h.raw('GET', '/openapi.json');
  checkEqual(r.status, 200, 'GET /openapi.json');
  const doc = r.json as Record<string, unknown>;
  check(typeof doc === 'object' && doc !== null, 'the document is a JSON object');
  check(typeof doc.openapi === 'string' && /^3\.\d+\.\d+$/.test(doc.openapi), `openapi version: ${show(doc.openapi)}`);
  const info = doc.info as Record<string, unknown> | undefined;
  check(typeof info?.title === 'string' && typeof info.version === 'string', 'info.title and info.version');
  const paths = doc.paths as Record<string, Record<string, unknown>> | undefined;
  check(typeof paths === 'object' && paths !== null, 'paths object');
  const normal = new Map<string, Record<string, unknown>>();
  for (const [path, item] of Object.entries(paths)) {
    check(path.startsWith('/'), `path ${path} starts with /`);
    normal.set(path.replace(/\{[^}]+\}/g, '{}'), item);
    for (const [method, op] of Object.entries(item)) {
      if (!['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'].includes(method)) continue;
      const operation = op as Record<string, unknown>;
      check(
        typeof operation.responses === 'object' && operation.responses !== null && Object.keys(operation.responses).length > 0,
        `${method.toUpperCase()} ${path} lists its responses`,
      );
      // Every templated segment is declared as a path parameter.
      for (const m of path.matchAll(/\{([^}]+)\}/g)) {
        const params = [
          ...((operation.parameters as { name: string; in: string }[] | undefined) ?? []),
          ...((item.parameters as { name: string; in: string }[] | undefined) ?? []),
        ];
        check(
          params.some((x) => x.in === 'path' && x.name === m[1]),
          `${method.toUpperCase()} ${path} declares path parameter ${m[1]}`,
        );
      }
    }
  }
  const templatedWrite = normal.get('/v1/partitions/{}/{}');
  const required = [...CONTRACT_PATHS, ...(h.controls?.offered ?? []).flatMap((c) => CONTROL_PATHS[c])];
  for (const { path, method } of required) {
    const item = normal.get(path) ?? (path.match(/^\/v1\/partitions\/\{\}\/[a-z-]+$/) && method === 'post' ? templatedWrite : undefined);
    check(item?.[method] !== undefined, `${method.toUpperCase()} ${path} is described`);
    if (WRITE_NAMES.some((w) => path.endsWith(`/${w}`))) {
      const op = item[method] as { requestBody?: unknown; responses: Record<string, unknown> };
      check(op.requestBody !== undefined, `POST ${path} describes its request body`);
      check('200' in op.responses && '409' in op.responses, `POST ${path} describes 200 (accepted) and 409 (refused)`);
    }
  }
  // Every local $ref resolves.
  const refs: string[] = [];
  const walk = (v: unknown): void => {
    if (Array.isArray(v)) v.forEach(walk);
    else if (typeof v === 'object' && v !== null) {
      for (const [k, x] of Object.entries(v)) {
        if (k === '$ref' && typeof x === 'string') refs.push(x);
        else walk(x);
      }
    }
  };
  walk(doc);
  for (const ref of refs) {
    check(ref.startsWith('#/'), `$ref ${ref} is local`);
    let at: unknown = doc;
    for (const seg of ref.slice(2).split('/')) {
      at = (at as Record<string, unknown> | undefined)?.[seg.replace(/~1/g, '/').replace(/~0/g, '~')];
    }
    check(at !== undefined, `$ref ${ref} resolves`);
  }
});

readCase('healthz and reads: answer and parse against the contract', async (h) => {
  await h.client.health();
  let topo = await h.client.topology();
  if (topo.partitions.length === 0) {
    if (!h.mayCreate()) throw new Skip('the broker holds no partition to read, and this run may not create one');
    await h.quietQueue();
    topo = await h.client.topology();
  }
  check(topo.nodes.length > 0 && topo.partitions.length > 0, 'the topology lists nodes and partitions');
  const p = topo.partitions[0]!;
  const view = await h.client.partition(p.id);
  checkEqual(view.partition.id, p.id, 'partition view id');
  checkEqual(view.progress.partition, p.id, 'progress partition id');
  checkEqual(view.partition.writeRequirement, writeRequirement(p.durability, p.replicationFactor), 'W from the policy');
  for (const x of topo.partitions) {
    checkEqual(x.writeRequirement, writeRequirement(x.durability, x.replicationFactor), `W of ${x.id}`);
  }
  const { nodes } = await h.client.nodes();
  checkEqual(nodes.map((n) => n.id).join(','), topo.nodes.map((n) => n.id).join(','), 'GET /v1/nodes lists the topology\'s nodes');
  const budget = await h.client.syncBudget();
  check(budget.clusterInUse <= budget.clusterLimit, `cluster transfers in use within the limit: ${show(budget)}`);
});

readCase('event feed (reads only): seq rises, the cursor is the last seq, and reading resumes after it', async (h) => {
  const first = await h.client.events(0, { limit: 50 });
  for (const [i, e] of first.events.entries()) {
    check(e.seq > 0, `event seq ${e.seq} > after=0`);
    if (i > 0) check(e.seq > first.events[i - 1]!.seq, `seq rises: ${first.events[i - 1]!.seq} then ${e.seq}`);
  }
  checkEqual(first.cursor, first.events.at(-1)?.seq ?? 0, 'cursor = last seq returned (or after when none)');
  check(first.events.length <= 50, `limit=50 returns at most 50 events, got ${first.events.length}`);
  const next = await h.client.events(first.cursor, { limit: 50 });
  check(
    next.events.every((e) => e.seq > first.cursor),
    `a page read from cursor ${first.cursor} holds only later events: ${show(next.events.map((e) => e.seq))}`,
  );
  const end = await h.cursor();
  check(end >= first.cursor, `the end of the feed (${end}) is at or after the first page's cursor (${first.cursor})`);
});

readCase('topology changes (reads only): applied to an earlier read, they give what a whole read gives', async (h) => {
  const first = await h.client.topology();
  const changes = await h.client.topologyChanges(first.generation);
  check(changes !== null, `GET /v1/topology/changes?after=${first.generation} (the generation just read) answers 200`);
  check(changes.generation >= first.generation, `the changes bring the reader to ${changes.generation}, not before ${first.generation}`);
  checkEqual(changes.nodes.map((n) => n.id).join(','), first.nodes.map((n) => n.id).join(','), 'the changes list every node');
  const model = applyChanges(first, changes);
  const whole = await h.client.topology();
  const since = await h.client.topologyChanges(model.generation);
  check(since !== null, `GET /v1/topology/changes?after=${model.generation} answers 200`);
  // Records that changed after the model's generation may differ for good reason; no other may.
  const drifted = driftBetween(model, whole, new Set([...since.partitions.map((p) => p.id), ...since.removed]));
  check(drifted.length === 0, `records the changes left different from a whole read: ${show(drifted.slice(0, 5))}`);
  const ahead = await h.raw('GET', `/v1/topology/changes?after=${whole.generation + 1_000_000}`);
  checkEqual(ahead.status, 410, 'changes after a generation the broker has not reached: 410 (read the whole topology)');
  for (const after of ['-1', 'x']) {
    const r = await h.raw('GET', `/v1/topology/changes?after=${after}`);
    checkEqual(r.status, 400, `changes after=${after}`);
  }
});

/**
 * The topology's pages, where the broker offers them: every record once, in id order, each page within its limit,
 * and bad parameters refused. Where the broker holds no partition but the suite's, the cases create them.
 */
async function checkPages(h: Harness): Promise<void> {
  const whole = await h.client.topology();
  const probe = await h.raw('GET', '/v1/topology/page?limit=1');
  if (probe.status === 404) throw new Skip('the broker does not offer GET /v1/topology/page: the rebalancer checks its model with whole reads');
  // About 20 pages whatever the broker's size, at least 2 records a page.
  const limit = Math.min(10_000, Math.max(2, Math.ceil(whole.partitions.length / 20)));
  const ids: string[] = [];
  let after: string | null = null;
  for (let pages = 0; ; pages++) {
    check(pages <= whole.partitions.length + 2, `the pages end: ${pages} pages of ${limit} for ${whole.partitions.length} partitions`);
    const page = await h.client.topologyPage(after, limit);
    check(page.partitions.length <= limit, `a page of limit=${limit} holds ${page.partitions.length} records`);
    checkEqual(page.nodes.map((n) => n.id).join(','), whole.nodes.map((n) => n.id).join(','), 'every page lists every node');
    for (const p of page.partitions) {
      const last = ids.at(-1) ?? after;
      check(last === null || p.id > last, `ids rise in code-unit order across pages: ${p.id} after ${last}`);
      ids.push(p.id);
    }
    if (page.next === null) break;
    checkEqual(page.next, page.partitions.at(-1)?.id, "next is the page's last id");
    after = page.next;
  }
  // Partitions created or deleted while the pages were read may be in one read and not the other.
  const since = await h.client.topologyChanges(whole.generation);
  const churn = new Set([...(since?.removed ?? []), ...(since?.partitions.map((p) => p.id) ?? [])]);
  const paged = new Set(ids);
  const missing = whole.partitions.filter((p) => !paged.has(p.id) && !churn.has(p.id)).map((p) => p.id);
  const known = new Set(whole.partitions.map((p) => p.id));
  const extra = ids.filter((id) => !known.has(id) && !churn.has(id));
  check(missing.length === 0 && extra.length === 0, `the pages hold what a whole read holds: missing ${show(missing.slice(0, 5))}, extra ${show(extra.slice(0, 5))}`);
  for (const query of ['limit=0', 'limit=10001', 'limit=x', 'after=not%20an%20id!']) {
    const r = await h.raw('GET', `/v1/topology/page?${query}`);
    checkEqual(r.status, 400, `page ${query}`);
  }
}

readCase('topology pages (reads only, where offered): every record once, in id order, each page within its limit', checkPages);

conformance('topology pages over partitions of this run: every record once, in id order, each page within its limit', [], async (h) => {
  await h.quietQueues(5);
  await checkPages(h);
});

conformance('topology changes: a write, a new partition and a deleted one are listed after the generation before them', [], async (h) => {
  const [p, gone] = await h.quietQueues(2);
  const before = (await h.client.topology()).generation;
  const target = await h.spareNode([p!.owner, ...p!.followers]);
  await h.accept(p!.id, 'add-learner', { node: target });
  const born = await h.quietQueue();
  await h.deletePartition(gone!.id);
  const changes = await h.client.topologyChanges(before);
  check(changes !== null, `GET /v1/topology/changes?after=${before} answers 200`);
  const listed = new Map(changes.partitions.map((x) => [x.id, x]));
  check(listed.get(p!.id)?.learners.includes(target) === true, `${p!.id} is listed with its new learner ${target}: ${show(listed.get(p!.id)?.learners)}`);
  check(listed.has(born.id), `the new partition ${born.id} is listed`);
  check(changes.removed.includes(gone!.id), `the deleted partition ${gone!.id} is listed as removed: ${show(changes.removed)}`);
  check(!listed.has(gone!.id), `the deleted partition ${gone!.id} is not listed as a record`);
});

export const CONFORMANCE_CASES: readonly ConformanceCase[] = cases;
