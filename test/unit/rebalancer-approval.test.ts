import { describe, expect, it } from 'vitest';
import type { Partition, Topology } from '../../cluster/contract';
import { DEFAULT_PLANNER_CONFIG, planToConvergence } from '../../planner';
import type { InFlightMove, Proposal } from '../../planner/types';
import type { ApprovalState, PastPlan, ProposedPlan } from '../../rules/definitions';
import { approvalRecord, approvedNow, basisOf, checkApprove, checkRefresh, PAST_PLANS, PAST_STALE_STEPS, proposalOf, remember, staleSteps } from '../../rules/rebalancer-approval';
import { input, node, partition, ring, topology } from './planner-topology';
import { firstSteps, PROPOSAL_STEPS } from '../../activities/rebalancer';
import { large } from '../../bench/planner';
import { PLAN_RECORD_STEPS, planRecord } from '../../rules/rebalancer-rules';

const step = (partition: string, from: string, to: string, op: Proposal['op'] = 'follower_move'): Proposal => ({ op, partition, from, to, bytes: 100, reason: 'test' });

/** n1..n4 live; q-1 and q-2 on n1 (owner), n2, n3; n4 empty. */
function cluster(): Topology {
  return topology([node('n1'), node('n2'), node('n3'), node('n4')], [partition('q-1', 'n1', ['n2', 'n3']), partition('q-2', 'n1', ['n2', 'n3'])]);
}

function planOn(t: Topology, steps: Proposal[]): Pick<ProposedPlan, 'steps' | 'basis'> {
  return { steps, basis: basisOf(t, steps) };
}

/** `t` with partition `id` changed by `change` and its record version bumped, as a guarded write does. */
function changed(t: Topology, id: string, change: Partial<Partition>): Topology {
  return { ...t, partitions: t.partitions.map((p) => (p.id === id ? { ...p, ...change, generation: p.generation + 1 } : p)) };
}

function withNode(t: Topology, id: string, change: Partial<Topology['nodes'][number]>): Topology {
  return { ...t, nodes: t.nodes.map((n) => (n.id === id ? { ...n, ...change } : n)) };
}

describe('staleSteps: which steps of a plan are stale at approval, and why', () => {
  const steps = [step('q-1', 'n3', 'n4'), step('q-2', 'n2', 'n4')];

  it('keeps every step when nothing changed', () => {
    const t = cluster();
    expect(staleSteps(planOn(t, steps), t)).toEqual({ fresh: steps, stale: [] });
  });

  it("refuses a step whose partition's generation changed, naming the generations and what changed; the rest stay", () => {
    const t = cluster();
    const plan = planOn(t, steps);
    const now = changed(t, 'q-1', { followers: ['n2', 'n4'] });
    const r = staleSteps(plan, now);
    expect(r.fresh).toEqual([steps[1]]);
    expect(r.stale).toEqual([{ step: steps[0], reason: 'q-1 changed since the plan was made (generation 1 -> 2: n3 is no longer a follower, n4 holds a copy now)' }]);
  });

  it('refuses a changed partition even when the change is not one it can name (an epoch after a recovery)', () => {
    const t = cluster();
    const r = staleSteps(planOn(t, steps), changed(t, 'q-2', { epoch: 2 }));
    expect(r.stale.map((s) => s.reason)).toEqual(['q-2 changed since the plan was made (generation 1 -> 2)']);
  });

  it('refuses the steps on a node that went down, is draining or left the cluster', () => {
    const t = cluster();
    const plan = planOn(t, steps);
    expect(staleSteps(plan, withNode(t, 'n4', { live: false })).stale.map((s) => s.reason)).toEqual(['n4 went down', 'n4 went down']);
    expect(staleSteps(plan, withNode(t, 'n2', { draining: true })).stale).toEqual([{ step: steps[1], reason: 'n2 is draining' }]);
    const gone = { ...t, nodes: t.nodes.filter((n) => n.id !== 'n3') };
    expect(staleSteps(plan, gone).stale).toEqual([{ step: steps[0], reason: 'n3 left the cluster' }]);
  });

  it('names every reason of one step together', () => {
    const t = cluster();
    const now = withNode(changed(t, 'q-1', { pendingRecovery: { epoch: 1, openedAt: 0, reason: 'owner failed', failedOwner: 'n1' } }), 'n4', { live: false });
    expect(staleSteps(planOn(t, steps), now).stale[0]!.reason).toBe('q-1 changed since the plan was made (generation 1 -> 2: a recovery is pending); n4 went down');
  });

  it('refuses a handoff whose owner changed, and a later step of a partition whose earlier step is stale', () => {
    const t = cluster();
    const plan = planOn(t, [step('q-1', 'n1', 'n2', 'owner_handoff'), step('q-2', 'n3', 'n4'), step('q-2', 'n1', 'n4', 'owner_handoff')]);
    const now = withNode(changed(t, 'q-1', { owner: 'n3', followers: ['n1', 'n2'] }), 'n3', {});
    const stillN3 = staleSteps(plan, now);
    expect(stillN3.stale).toEqual([{ step: plan.steps[0], reason: 'q-1 changed since the plan was made (generation 1 -> 2: n3 owns it now)' }]);
    // The handoff onto n4 was planned on top of the move onto n4: once the move is stale, so is the handoff.
    const down = staleSteps(plan, withNode(t, 'n3', { live: false }));
    expect(down.stale.map((s) => [s.step.partition, s.step.op, s.reason])).toEqual([
      ['q-2', 'follower_move', 'n3 went down'],
      ['q-2', 'owner_handoff', 'it was planned after an earlier step of q-2, which is stale'],
    ]);
    expect(down.fresh).toEqual([plan.steps[0]]);
  });

  it('refuses a step an operator has held since: its partition pinned, or a node it touches excluded', () => {
    const t = cluster();
    const note = { by: 'alice', reason: 'audit', at: 0 };
    expect(staleSteps(planOn(t, steps), t, { pinned: { 'q-1': note } }).stale).toEqual([{ step: steps[0], reason: 'q-1 is pinned by alice: audit' }]);
    expect(staleSteps(planOn(t, steps), t, { excluded: { n2: note } }).stale.map((s) => s.step)).toEqual([steps[1]]);
  });

  it('refuses a partition that no longer exists', () => {
    const t = cluster();
    const gone = { ...t, partitions: t.partitions.filter((p) => p.id !== 'q-2') };
    expect(staleSteps(planOn(t, steps), gone).stale).toEqual([{ step: steps[1], reason: 'q-2 no longer exists' }]);
  });

  it('a plan to convergence on a real topology is fresh on that topology, and each partition it touches is in its basis', () => {
    const t = ring(3, 1, 4);
    const plan = planToConvergence(input(t), DEFAULT_PLANNER_CONFIG);
    expect(plan.steps.length).toBeGreaterThan(0);
    const proposed = proposalOf('p-00000001', 0, t.generation, plan, basisOf(t, plan.steps));
    expect(proposed.bytes).toBe(plan.steps.filter((s) => s.op === 'follower_move').reduce((a, s) => a + s.bytes, 0));
    expect(staleSteps(proposed, t)).toEqual({ fresh: plan.steps, stale: [] });
    for (const s of plan.steps) expect(proposed.basis.partitions[s.partition]).toBe(1);
  });
});

describe('approvedNow: the approved steps that may start, in order', () => {
  const queue = [step('q-1', 'n3', 'n4'), step('q-2', 'n1', 'n4', 'owner_handoff'), step('q-3', 'n2', 'n4')];
  const moving: InFlightMove = { partition: 'q-9', op: 'follower_move', from: 'n1', to: 'n4', bytesRemaining: 10 };

  it('holds owner handoffs while a follower move is queued or in flight', () => {
    expect(approvedNow(queue, [])).toEqual([queue[0], queue[2]]);
    expect(approvedNow([queue[1]!], [moving])).toEqual([]);
  });
  it('starts the handoffs once the follower moves are done', () => {
    expect(approvedNow([queue[1]!], [])).toEqual([queue[1]]);
  });
});

describe('checkApprove and checkRefresh: who may approve what, and the state of a used or unknown plan', () => {
  const pending: ProposedPlan = { id: 'p-aaaaaaaa', madeAt: Date.UTC(2026, 0, 1), generation: 7, steps: [step('q-1', 'n3', 'n4')], bytes: 100, predictedMs: 1, spreadBefore: 1, spreadAfter: 0, mean: 1, basis: { partitions: {}, nodes: {} } };
  const approved: PastPlan = { id: 'p-bbbbbbbb', madeAt: 0, generation: 5, steps: 3, state: 'approved', approved: { by: 'alice', reason: 'off-peak', at: Date.UTC(2026, 0, 1, 12), accepted: 2, stale: [{ step: step('q-2', 'n2', 'n4'), reason: 'n4 went down' }] } };
  const superseded: PastPlan = { id: 'p-cccccccc', madeAt: 0, generation: 4, steps: 1, state: 'superseded', superseded: { by: 'bob', reason: 'n5 joined', at: Date.UTC(2026, 0, 1, 11), plan: 'p-aaaaaaaa' } };
  const state: ApprovalState = { pending, approved: null, past: [approved, superseded] };
  const ask = (planId: string) => ({ planId, by: 'carol', reason: 'reviewed' });

  it('accepts the pending plan', () => {
    expect(checkApprove(ask('p-aaaaaaaa'), state, 'propose', null)).toBeNull();
  });
  it.each([
    ['an approved plan', 'p-bbbbbbbb', 'plan_used', 'plan p-bbbbbbbb was already approved at 2026-01-01T12:00:00.000Z by alice (off-peak): 2 step(s) accepted, 1 refused as stale; the pending plan is p-aaaaaaaa'],
    ['a superseded plan', 'p-cccccccc', 'plan_used', 'plan p-cccccccc was superseded at 2026-01-01T11:00:00.000Z by plan p-aaaaaaaa (refresh by bob: n5 joined); the pending plan is p-aaaaaaaa'],
    ['an unknown plan', 'p-dddddddd', 'unknown_plan', 'unknown plan p-dddddddd: the pending plan is p-aaaaaaaa (made at 2026-01-01T00:00:00.000Z on generation 7); the loop remembers its last 20 plans'],
  ])('refuses %s with its state', (_name, id, code, message) => {
    expect(checkApprove(ask(id), state, 'propose', null)).toEqual({ code, message });
  });
  it('a past plan keeps the first stale steps and counts them all, so the state stays bounded', () => {
    const stale = Array.from({ length: 500 }, (_, i) => ({ step: step(`q-${i}`, 'n2', 'n4'), reason: 'n4 went down' }));
    const record = approvalRecord({ by: 'alice', reason: 'off-peak', at: Date.UTC(2026, 0, 1, 12) }, 0, stale);
    expect(record.stale).toEqual(stale.slice(0, PAST_STALE_STEPS));
    expect(record.refused).toBe(500);
    const past: PastPlan = { ...approved, approved: record };
    expect(checkApprove(ask('p-bbbbbbbb'), { ...state, past: [past] }, 'propose', null)?.message).toMatch(/: 0 step\(s\) accepted, 500 refused as stale;/);
  });
  it('says when no plan is pending', () => {
    expect(checkApprove(ask('p-dddddddd'), { ...state, pending: null }, 'propose', null)?.message).toMatch(/^unknown plan p-dddddddd: no plan is pending/);
    expect(checkApprove(ask('p-dddddddd'), undefined, 'propose', null)?.code).toBe('unknown_plan');
  });
  it('refuses in auto mode, while paused, and without who and why', () => {
    expect(checkApprove(ask('p-aaaaaaaa'), state, 'auto', null)).toMatchObject({ code: 'auto_mode', message: expect.stringMatching(/runs in auto mode: .*REBALANCER_MODE=propose/) });
    expect(checkApprove(ask('p-aaaaaaaa'), state, 'propose', { by: 'dan', reason: 'incident', at: 0 })).toMatchObject({ code: 'paused', message: expect.stringMatching(/paused by dan \(incident\): resume it first/) });
    expect(checkApprove({ planId: 'p-aaaaaaaa', by: 'carol', reason: ' ' }, state, 'propose', null)).toMatchObject({ code: 'bad_request', message: expect.stringMatching(/approve needs a reason/) });
    expect(checkRefresh({ by: '', reason: 'x' }, 'propose', null)).toMatchObject({ code: 'bad_request', message: expect.stringMatching(/refresh needs who asks/) });
    expect(checkRefresh({ by: 'carol', reason: 'x' }, 'auto', null)?.code).toBe('auto_mode');
    expect(checkRefresh({ by: 'carol', reason: 'x' }, 'propose', null)).toBeNull();
  });
  it('remembers the latest plans, newest first, bounded', () => {
    let past: PastPlan[] = [];
    for (let i = 0; i < PAST_PLANS + 5; i++) past = remember(past, { ...superseded, id: `p-${String(i).padStart(8, '0')}` });
    expect(past).toHaveLength(PAST_PLANS);
    expect(past[0]!.id).toBe(`p-${String(PAST_PLANS + 4).padStart(8, '0')}`);
  });
});

describe('a proposal at 1,000 nodes and 100,000 partitions', () => {
  it('holds the first PROPOSAL_STEPS steps of the plan to convergence, under the 512 KB Temporal warns at, and says how many follow', () => {
    const t = large();
    const config = { ...DEFAULT_PLANNER_CONFIG };
    const whole = planToConvergence({ topology: t, inFlight: [], cooldowns: { nodes: {}, partitions: {} }, now: t.now, draining: [] }, config);
    const kb = (x: unknown) => JSON.stringify(x).length / 1024;
    // The premise: uncapped, the proposal passes the bound.
    expect(kb(proposalOf('p-1', t.now, 1, whole, basisOf(t, whole.steps)))).toBeGreaterThan(512);
    const first = firstSteps(whole, config);
    const proposal = proposalOf('p-1', t.now, 1, first, basisOf(t, first.steps));
    expect(proposal.steps).toEqual(whole.steps.slice(0, PROPOSAL_STEPS));
    expect(proposal.beyond).toBe(whole.steps.length - PROPOSAL_STEPS);
    expect(proposal.predictedMs).toBeLessThan(whole.predictedMs);
    expect(kb(proposal)).toBeLessThan(512);
    // A plan record keeps the first steps and the count of all.
    const record = planRecord(t.now, whole, [], [], null);
    expect(record).toMatchObject({ steps: whole.steps.slice(0, PLAN_RECORD_STEPS), stepCount: whole.steps.length });
    expect(kb(record)).toBeLessThan(64);
  });
});
