/**
 * Drain one node (`drainWorkflowId(node)`), as the note's table says: mark it draining through the contract,
 * hand off every partition it owns to an admitted follower, then move every follower copy off it, each target
 * chosen by the planner (`draining` in its input) under the transfer limits. It ends when the node holds no
 * copy, or, for a drain of the queues only, no queue copy (its stream copies, which nothing moves yet, listed
 * in the outcome); the mark stays, so nothing moves back until `undrain`. Cancelling it starts no new move,
 * lets the moves in flight finish or abort cleanly on their own, then clears the mark.
 */
import {
  ApplicationFailure,
  CancellationScope,
  CancelledFailure,
  condition,
  continueAsNew,
  isCancellation,
  patched,
  proxyActivities,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import type { RebalancerActivities, Snapshot } from '../activities/rebalancer';
import { drainStatusQuery, topologySignal, type DrainOutcome, type DrainRequest, type DrainState, type DrainStatus, type PlanRecord, type RebalancerSettings } from '../rules/definitions';
import { blockerLine, drainStarts, type DrainLeft } from '../rules/rebalancer-drain-rules';
import { checkNodeDrain, configuredSettings, planMoves, rebalancerSnapshot, startMoves } from './rebalancer-moves';
import { planRecord, pruneCooldowns, recordEnded } from '../rules/rebalancer-rules';

// The draining mark is a write: a normal activity, so its input is kept for retries.
const { setNodeDraining } = proxyActivities<RebalancerActivities>({
  startToCloseTimeout: '10s',
  retry: { initialInterval: '500ms', backoffCoefficient: 2, maximumInterval: '10s' },
});

export async function drain(request: DrainRequest): Promise<DrainOutcome> {
  const { node } = request;
  const queuesOnly = request.queuesOnly === true;
  const settings: RebalancerSettings = request.settings ?? (await configuredSettings());
  const state: DrainState = request.state ?? { phase: 'marking', inFlight: [], cooldowns: { nodes: {}, partitions: {} }, ticks: 0, moves: { started: 0, completed: 0, cancelled: 0, aborted: 0 } };
  let left: DrainLeft | null = null;
  let blockingReasons: string[] = [];
  let lastPlan: PlanRecord | null = null;
  let outcome: DrainOutcome | null = null;
  let wake = false;

  setHandler(topologySignal, () => void (wake = true));
  setHandler(drainStatusQuery, (): DrainStatus => ({
    ...state,
    node,
    by: request.by,
    reason: request.reason,
    queuesOnly,
    partitionsLeft: left?.partitionsLeft ?? null,
    ownedLeft: left?.ownedLeft ?? null,
    bytesLeft: left?.bytesLeft ?? null,
    streamsLeft: left?.streams ?? null,
    blockingReasons,
    notice: request.notice ?? null,
    lastPlan,
    outcome,
  }));

  const moveCount = () => state.moves.completed;
  // A drain moves each copy off the node once and never back, so a partition it just handed off need not cool
  // down before its follower copy there moves too: cooling it only held the drain for the partition cooldown.
  const cooling = patched('drain-handoff-does-not-cool') ? { ...settings.planner, partitionCooldownMs: 0 } : settings.planner;
  state.since ??= Date.now();
  const startedByOp = (state.startedByOp ??= { follower_move: 0, owner_handoff: 0, follower_replace: 0 });

  /** Snapshot, forget the moves that ended, and count what is left on the node. */
  async function look(): Promise<Snapshot> {
    const snapshot = await rebalancerSnapshot(state.inFlight, node);
    const now = Date.now();
    const ended = recordEnded(state.inFlight, snapshot.ended, state.cooldowns, state.moves, now, cooling);
    state.inFlight = ended.inFlight;
    state.moves = ended.counts;
    state.cooldowns = pruneCooldowns(ended.cooldowns, now);
    left = snapshot.left;
    return snapshot;
  }

  async function step(): Promise<boolean> {
    const snapshot = await look();
    // A stream copy never moves: only a drain of the queues only ends with one left.
    if (left!.partitionsLeft === 0 && state.inFlight.length === 0 && (queuesOnly || (left!.streams ?? []).length === 0)) return true;
    state.phase = left!.ownedLeft > 0 ? 'handing_off' : 'moving_followers';
    const pending = snapshot.recoveryPending;
    if (pending) {
      blockingReasons = [`waiting while a recovery is pending: ${pending}`];
      return false;
    }
    const now = Date.now();
    const plan = await planMoves({ inFlight: snapshot.inFlight, cooldowns: state.cooldowns, now, draining: [node], drain: { node, queuesOnly } }, settings.planner);
    const selection = drainStarts(plan.steps, snapshot.inFlight, settings.planner, node, state.phase === 'handing_off');
    const started: string[] = [];
    const skipped = [...selection.skipped];
    await startMoves(selection.start, 'planner', now, () => null, (s, result) => {
      if ('skipped' in result) {
        skipped.push({ partition: s.partition, reason: result.skipped });
        return;
      }
      state.inFlight.push(result.move);
      state.moves.started++;
      startedByOp[s.op]++;
      started.push(s.partition);
      void result.handle.result().then(
        () => (wake = true),
        () => (wake = true),
      );
    });
    // What holds the copies the plan moves nowhere: all of it while nothing moves, else only what never passes by itself.
    const blockers = plan.blockers ?? [];
    const idle = started.length === 0 && state.inFlight.length === 0;
    const held = (idle ? blockers : blockers.filter((b) => !b.passes)).map(blockerLine);
    const idleReason = idle ? (held[0] ?? plan.idleReason ?? `the planner proposed no ${state.phase === 'handing_off' ? 'owner handoff' : 'follower move'} off ${node}`) : null;
    lastPlan = planRecord(now, plan, started, skipped, idleReason);
    blockingReasons = [...new Set([...(idleReason ? [idleReason] : []), ...held, ...skipped.map((s) => s.reason)])];
    return false;
  }

  try {
    if (state.phase === 'marking') {
      const check = await checkNodeDrain(node, queuesOnly);
      if (!check.ok) {
        state.phase = 'refused';
        outcome = { status: 'refused', node, code: check.code, reason: check.message };
        throw ApplicationFailure.nonRetryable(check.message, check.code, outcome);
      }
      await setNodeDraining(node, true, `${request.reason} (drain by ${request.by})`);
      state.phase = 'handing_off';
    }
    for (let i = 0; i < settings.ticksPerRun && !workflowInfo().continueAsNewSuggested; i++) {
      state.ticks++;
      wake = false;
      if (await step()) {
        state.phase = 'completed';
        blockingReasons = [];
        outcome = { status: 'completed', node, moves: moveCount(), ...(queuesOnly ? { streamsLeft: left!.streams ?? [] } : {}) };
        return outcome;
      }
      await condition(() => wake, settings.tickMs);
    }
    return await continueAsNew<typeof drain>({ ...request, settings, state });
  } catch (err) {
    if (!isCancellation(err)) throw err;
    // Cancelled: start nothing more, let the moves in flight end on their own, then clear the mark.
    return await CancellationScope.nonCancellable(async () => {
      state.phase = 'finishing_moves';
      for (;;) {
        blockingReasons = state.inFlight.length > 0 ? [`waiting for ${state.inFlight.map((m) => m.workflowId).join(', ')} to end`] : [];
        await look();
        if (state.inFlight.length === 0) break;
        await condition(() => wake, settings.tickMs);
        wake = false;
      }
      state.phase = 'clearing_mark';
      await setNodeDraining(node, false, `drain of ${node} cancelled`);
      state.phase = 'cancelled';
      blockingReasons = [];
      outcome = { status: 'cancelled', node, reason: 'the drain was cancelled (undrain)', moves: moveCount() };
      // Ends Canceled in Temporal; the outcome stays in the status query.
      throw new CancelledFailure(outcome.reason);
    });
  }
}
