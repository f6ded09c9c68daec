/**
 * The loop's propose mode (REBALANCER_MODE=propose), inside the workflow sandbox: instead of starting what the
 * planner proposes, a tick publishes the planner's steps to convergence as a plan with an id and waits; an
 * approval (an update) checks the steps against a fresh topology, refuses the stale ones with why and queues the
 * rest, which the loop's ticks start under the usual transfer limits; a refresh supersedes the pending plan with a
 * fresh one. In auto mode the updates are refused with the mode, and nothing here runs.
 */
import { ApplicationFailure, proxyLocalActivities, setHandler, uuid4 } from '@temporalio/workflow';
import type { RebalancerActivities } from '../activities/rebalancer';
import type { InFlightMove, Plan } from '../planner/types';
import {
  approvePlanUpdate,
  refreshPlanUpdate,
  type ApprovalState,
  type OperatorNote,
  type PastPlan,
  type PauseRequest,
  type RebalancerSettings,
  type RebalancerState,
  type RebalancerStatus,
} from '../rules/definitions';
import { planHolds } from '../rules/rebalancer-rules';
import { approvalRecord, approvedNow, checkApprove, checkRefresh, proposalOf, remember, waitingForApproval, type ApprovalRefusal } from '../rules/rebalancer-approval';

// Local activities, like the loop's other reads and planning: reading or planning again after a crash is harmless.
const { proposePlan, checkPlanSteps } = proxyLocalActivities<RebalancerActivities>({
  startToCloseTimeout: '60s',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '15s' },
});

export interface ProposeHooks {
  status(): RebalancerStatus;
  wake(): void;
}

export interface ProposeMode {
  /** Propose mode's plan for this tick: the approved steps that may start now, or none while a plan waits. */
  plan(inFlight: InFlightMove[], now: number): Promise<Plan>;
  /** The partitions whose approved step the tick started. */
  started(partitions: string[]): void;
}

function refuseIf(refusal: ApprovalRefusal | null): void {
  if (refusal) throw ApplicationFailure.nonRetryable(refusal.message, refusal.code);
}

/** Registers the approval updates and returns what the tick calls in propose mode. */
export function proposeMode(state: RebalancerState, settings: RebalancerSettings, hooks: ProposeHooks): ProposeMode {
  const mode = settings.mode ?? 'auto';
  const approval = (): ApprovalState => (state.approval ??= { pending: null, approved: null, past: [] });
  // An approval checking its steps holds proposals back, so the tick does not publish a plan beside it.
  let checking = false;
  const note = (request: PauseRequest): OperatorNote => ({ by: request.by.trim(), reason: request.reason.trim(), at: Date.now() });

  /** A fresh plan to convergence, published when it has steps; it supersedes the one pending. */
  async function propose(refresh: OperatorNote | null, now: number): Promise<{ plan: Plan; published: string | null; superseded: string | null }> {
    const made = await proposePlan({ tracked: state.inFlight, cooldowns: state.cooldowns, now, cooled: true, ...planHolds(state) }, settings.planner);
    const a = approval();
    const id = made.plan.steps.length > 0 ? `p-${uuid4().slice(0, 8)}` : null;
    const old = a.pending;
    if (old) {
      const by = refresh ?? { by: 'the rebalancer', reason: 'a newer proposal', at: Date.now() };
      const past: PastPlan = { id: old.id, madeAt: old.madeAt, generation: old.generation, steps: old.steps.length, state: 'superseded', superseded: { ...by, plan: id } };
      a.past = remember(a.past, past);
    }
    // A refresh also drops approved steps not yet started: the operator asked for a plan from the cluster as it is.
    if (refresh && a.approved) a.approved.steps = [];
    a.pending = id ? proposalOf(id, Date.now(), made.generation, made.plan, made.basis) : null;
    return { plan: made.plan, published: id, superseded: old?.id ?? null };
  }

  setHandler(
    approvePlanUpdate,
    async (request) => {
      const a = approval();
      const plan = a.pending!;
      const by = note(request);
      // Recorded before the check, so a second approval of the same id is refused as used, not unknown.
      const entry: PastPlan = { id: plan.id, madeAt: plan.madeAt, generation: plan.generation, steps: plan.steps.length, state: 'approved', approved: { ...by, accepted: 0, stale: [] } };
      a.pending = null;
      a.past = remember(a.past, entry);
      checking = true;
      try {
        const { fresh, stale } = await checkPlanSteps({ steps: plan.steps, basis: plan.basis }, { pinned: state.pinned, excluded: state.excluded });
        entry.approved = approvalRecord(by, fresh.length, stale);
        // The moves carry who approved them, for the Temporal UI and the moves' own records.
        const queued = fresh.map((s) => ({ ...s, reason: `${s.reason}; approved in plan ${plan.id} by ${by.by}: ${by.reason}` }));
        a.approved = { planId: plan.id, steps: queued, spreadBefore: plan.spreadBefore, spreadAfter: plan.spreadAfter, mean: plan.mean };
        hooks.wake();
        return { planId: plan.id, accepted: fresh, stale, status: hooks.status() };
      } finally {
        checking = false;
      }
    },
    { validator: (request) => refuseIf(checkApprove(request, state.approval, mode, state.paused)) },
  );
  setHandler(
    refreshPlanUpdate,
    async (request) => {
      const by = note(request);
      const made = await propose(by, by.at);
      return { plan: approval().pending, idleReason: made.published ? null : (made.plan.idleReason ?? 'the planner proposed nothing'), superseded: made.superseded, status: hooks.status() };
    },
    { validator: (request) => refuseIf(checkRefresh(request, mode, state.paused)) },
  );

  return {
    async plan(inFlight, now) {
      const a = approval();
      const idle = (idleReason: string, from: { spreadBefore: number; spreadAfter: number; mean: number } | null = null): Plan => ({
        planningMs: 0,
        steps: [],
        spreadBefore: from?.spreadBefore ?? 0,
        spreadAfter: from?.spreadAfter ?? 0,
        mean: from?.mean ?? 0,
        threshold: settings.planner.threshold,
        predictedMs: 0,
        idleReason,
      });
      if (a.approved && a.approved.steps.length === 0 && state.inFlight.length === 0) a.approved = null;
      if (a.approved && a.approved.steps.length > 0) {
        const steps = approvedNow(a.approved.steps, inFlight);
        const waiting = `approved plan ${a.approved.planId}: its owner handoffs wait until no follower move is in flight`;
        return { ...idle(waiting, a.approved), steps, idleReason: steps.length > 0 ? null : waiting };
      }
      if (a.approved) return idle(`the moves of approved plan ${a.approved.planId} are in flight: the next plan is made once they end`, a.approved);
      if (!a.pending && !checking) {
        const made = await propose(null, now);
        if (!made.published) return made.plan;
      }
      return a.pending ? idle(`waiting for ${waitingForApproval(a.pending)}`, a.pending) : idle('an approval is checking its steps against the broker');
    },
    started(partitions) {
      const a = state.approval?.approved;
      if (!a) return;
      for (const partition of partitions) {
        const i = a.steps.findIndex((s) => s.partition === partition);
        if (i >= 0) a.steps.splice(i, 1);
      }
    },
  };
}
