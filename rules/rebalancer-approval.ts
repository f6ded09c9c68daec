/**
 * Propose mode's rules as pure functions (REBALANCER_MODE=propose): what a plan records to judge its steps by
 * later, which steps are stale at approval and why, which approved steps may start now, and why an approval or a
 * refresh is refused. Deterministic: used inside the loop's workflow and by its activities.
 */
import type { Topology } from '../cluster/contract';
import type { InFlightMove, Plan, Proposal } from '../planner/types';
import type { ApprovalState, ApproveRequest, OperatorNote, PastPlan, PauseRequest, PlanBasis, ProposedPlan, RebalancerMode, RebalancerState, StaleStep } from './definitions';
import { checkWhoAndWhy, holders, operatorHold } from './rebalancer-rules';

/** How many plans no longer pending the loop remembers, so a used id is refused with its state. */
export const PAST_PLANS = 20;

/**
 * Stale steps a past plan keeps: 20 plans of 500 stale steps each came to 3 MB of the state the loop carries
 * (`npm run bench -- payloads`), past the 512 KB Temporal warns at.
 */
export const PAST_STALE_STEPS = 10;

/** A past plan's record of its approval: the stale steps it keeps and how many were refused in all. */
export function approvalRecord(by: OperatorNote, accepted: number, stale: readonly StaleStep[]): NonNullable<PastPlan['approved']> {
  return { ...by, accepted, stale: stale.slice(0, PAST_STALE_STEPS), refused: stale.length };
}

/** A refusal of an approval or a refresh: `code` is the failure type clients map to their refusal codes. */
export interface ApprovalRefusal {
  code: 'auto_mode' | 'bad_request' | 'paused' | 'unknown_plan' | 'plan_used';
  message: string;
}

const iso = (at: number) => new Date(at).toISOString();

/** The partitions and nodes the steps touch, as the topology shows them when the plan is made. */
export function basisOf(topology: Topology, steps: readonly Proposal[]): PlanBasis {
  const partitions = new Map(topology.partitions.map((p) => [p.id, p.generation]));
  const nodes = new Map(topology.nodes.map((n) => [n.id, { live: n.live, draining: n.draining }]));
  const basis: PlanBasis = { partitions: {}, nodes: {} };
  for (const s of steps) {
    const generation = partitions.get(s.partition);
    if (generation !== undefined) basis.partitions[s.partition] = generation;
    for (const n of [s.from, s.to]) {
      const state = nodes.get(n);
      if (state) basis.nodes[n] = state;
    }
  }
  return basis;
}

/** The plan as the loop publishes it: the planner's steps with their bytes, predicted time and basis. */
export function proposalOf(id: string, madeAt: number, generation: number, plan: Plan & { beyond?: number }, basis: PlanBasis): ProposedPlan {
  const bytes = plan.steps.reduce((sum, s) => sum + (s.op !== 'owner_handoff' ? s.bytes : 0), 0);
  const { steps, predictedMs, spreadBefore, spreadAfter, mean, beyond } = plan;
  return { id, madeAt, generation, steps, bytes, predictedMs, spreadBefore, spreadAfter, mean, basis, ...(beyond ? { beyond } : {}) };
}

/** What changed about the step's partition since the plan was made, in the note's words. */
function partitionChange(step: Proposal, p: Topology['partitions'][number]): string[] {
  const seen: string[] = [];
  if (p.pendingRecovery) seen.push('a recovery is pending');
  if (p.learners.length > 0 || p.leaving || p.admission === 'closed') seen.push('a reconfiguration is in flight');
  if (step.op !== 'owner_handoff') {
    if (!p.followers.includes(step.from)) seen.push(`${step.from} is no longer a follower`);
    if (holders(p).includes(step.to)) seen.push(`${step.to} holds a copy now`);
  } else {
    if (p.owner !== step.from) seen.push(`${p.owner} owns it now`);
    if (!p.followers.includes(step.to)) seen.push(`${step.to} is not a follower`);
  }
  return seen;
}

/** Why the step's node is no longer as the plan saw it, or null. */
function nodeChange(node: string, basis: PlanBasis, topology: Topology): string | null {
  const now = topology.nodes.find((n) => n.id === node);
  if (!now) return `${node} left the cluster`;
  const then = basis.nodes[node];
  if (then?.live !== false && !now.live) return `${node} went down`;
  if (then?.draining !== true && now.draining) return `${node} is draining`;
  return null;
}

/** The loop's pins and exclusions, as its state keeps them. */
export type Holds = Pick<RebalancerState, 'pinned' | 'excluded'>;

/**
 * The plan's steps split into those that may start and those refused as stale, each with why: its partition's
 * record changed (its `generation`, with what changed), a node it touches went down, is draining or left, an
 * operator pinned its partition or excluded its node since, or an earlier step of the same partition is stale
 * (the later one was planned on top of it).
 */
export function staleSteps(plan: Pick<ProposedPlan, 'steps' | 'basis'>, topology: Topology, holds: Holds = {}): { fresh: Proposal[]; stale: StaleStep[] } {
  const partitions = new Map(topology.partitions.map((p) => [p.id, p]));
  const fresh: Proposal[] = [];
  const stale: StaleStep[] = [];
  const staleParts = new Set<string>();
  for (const step of plan.steps) {
    const reasons: string[] = [];
    const p = partitions.get(step.partition);
    const then = plan.basis.partitions[step.partition];
    if (!p) reasons.push(`${step.partition} no longer exists`);
    else if (then !== undefined && p.generation !== then) {
      const what = partitionChange(step, p);
      reasons.push(`${step.partition} changed since the plan was made (generation ${then} -> ${p.generation}${what.length > 0 ? `: ${what.join(', ')}` : ''})`);
    }
    for (const n of new Set([step.from, step.to])) {
      const change = nodeChange(n, plan.basis, topology);
      if (change) reasons.push(change);
    }
    const held = operatorHold(step, holds.pinned, holds.excluded);
    if (held) reasons.push(held);
    if (reasons.length === 0 && staleParts.has(step.partition)) reasons.push(`it was planned after an earlier step of ${step.partition}, which is stale`);
    if (reasons.length === 0) {
      fresh.push(step);
      continue;
    }
    staleParts.add(step.partition);
    stale.push({ step, reason: reasons.join('; ') });
  }
  return { fresh, stale };
}

/**
 * The approved steps that may start now, in the plan's order (the transfer limits still apply): owner handoffs
 * wait while a follower move is queued or in flight, as the planner orders them, since the plan's handoffs were
 * chosen on the topology after its follower moves.
 */
export function approvedNow(queue: readonly Proposal[], inFlight: readonly InFlightMove[]): Proposal[] {
  const movesLeft = queue.some((s) => s.op !== 'owner_handoff') || inFlight.some((m) => m.op !== 'owner_handoff');
  return movesLeft ? queue.filter((s) => s.op !== 'owner_handoff') : [...queue];
}

function pastState(past: PastPlan): string {
  if (past.state === 'approved' && past.approved) {
    const a = past.approved;
    return `plan ${past.id} was already approved at ${iso(a.at)} by ${a.by} (${a.reason}): ${a.accepted} step(s) accepted, ${a.refused ?? a.stale.length} refused as stale`;
  }
  const s = past.superseded;
  const by = s?.plan ? `plan ${s.plan}` : 'no plan (the planner proposed nothing)';
  return `plan ${past.id} was superseded${s ? ` at ${iso(s.at)} by ${by} (refresh by ${s.by}: ${s.reason})` : ''}`;
}

/** What the loop waits for in propose mode while a plan is pending. */
export function waitingForApproval(plan: ProposedPlan): string {
  return `approval of plan ${plan.id} (made at ${iso(plan.madeAt)} on generation ${plan.generation}, ${plan.steps.length} step(s)): rebalancer approve ${plan.id} --reason <why>`;
}

function modeAndNote(action: 'approve' | 'refresh', mode: RebalancerMode, request: PauseRequest | undefined, paused: OperatorNote | null): ApprovalRefusal | null {
  if (mode !== 'propose') {
    return { code: 'auto_mode', message: `the rebalancer runs in auto mode: it starts the planner's steps itself and publishes no plan to ${action} (REBALANCER_MODE=propose makes it wait for approval)` };
  }
  const problem = checkWhoAndWhy(action, request);
  if (problem) return { code: 'bad_request', message: problem };
  if (paused) return { code: 'paused', message: `the rebalancer is paused by ${paused.by} (${paused.reason}): resume it first, then ${action}` };
  return null;
}

/** Why an approval is refused, or null: the plan must be the pending one; a used or unknown id is named with its state. */
export function checkApprove(request: ApproveRequest | undefined, approval: ApprovalState | undefined, mode: RebalancerMode, paused: OperatorNote | null): ApprovalRefusal | null {
  const refused = modeAndNote('approve', mode, request, paused);
  if (refused) return refused;
  const id = request!.planId;
  const pending = approval?.pending ?? null;
  if (pending?.id === id) return null;
  const past = approval?.past.find((p) => p.id === id);
  if (past) return { code: 'plan_used', message: `${pastState(past)}; ${pending ? `the pending plan is ${pending.id}` : 'no plan is pending'}` };
  const now = pending ? `the pending plan is ${pending.id} (made at ${iso(pending.madeAt)} on generation ${pending.generation})` : 'no plan is pending';
  return { code: 'unknown_plan', message: `unknown plan ${String(id)}: ${now}; the loop remembers its last ${PAST_PLANS} plans` };
}

/** Why a refresh is refused, or null. */
export function checkRefresh(request: PauseRequest | undefined, mode: RebalancerMode, paused: OperatorNote | null): ApprovalRefusal | null {
  return modeAndNote('refresh', mode, request, paused);
}

/** `past` with `entry` first, bounded. */
export function remember(past: readonly PastPlan[], entry: PastPlan): PastPlan[] {
  return [entry, ...past.filter((p) => p.id !== entry.id)].slice(0, PAST_PLANS);
}
