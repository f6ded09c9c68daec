/**
 * The rebalancer loop: one long-running workflow per broker and task queue (`rebalancerWorkflowId(scope)`).
 * While it is not paused and no recovery is pending, each tick takes a snapshot, asks the planner and starts
 * the planned follower moves and owner handoffs as reconfigurations that outlive it (origin `planner`), within
 * the transfer limits; cooldowns follow every completed reconfiguration, whoever started it. A topology signal
 * (node joined, up or down, draining, a recovery opened or activated) or an ended move wakes it at once;
 * otherwise it ticks on a timer.
 * In propose mode (rebalancer-propose.ts) a tick publishes the plan instead and starts only approved steps.
 */
import { allHandlersFinished, condition, continueAsNew, setHandler, workflowInfo } from '@temporalio/workflow';
import {
  excludeUpdate,
  includeUpdate,
  pauseUpdate,
  pinUpdate,
  unpinUpdate,
  rebalancerStatusQuery,
  resumeUpdate,
  topologySignal,
  type OperatorNote,
  type PauseRequest,
  type PinRequest,
  type ExcludeRequest,
  type RebalancerInput,
  type RebalancerState,
  type RebalancerStatus,
} from '../rules/definitions';
import { planMoves, rebalancerSnapshot, startMoves } from './rebalancer-moves';
import { proposeMode } from './rebalancer-propose';
import type { Proposal } from '../planner/types';
import { checkHold, checkOperatorNote, closedListFrom, cooldownsOnArrival, nodeArrived, nodeCooldowns, operatorHold, planHolds, planRecord, pruneCooldowns, recordClosed, recordEnded, selectStarts, type HoldAction } from '../rules/rebalancer-rules';

export function initialRebalancerState(): RebalancerState {
  return {
    paused: null,
    lastResumed: null,
    inFlight: [],
    cooldowns: { nodes: {}, partitions: {}, moves: {} },
    ticks: 0,
    lastPlan: null,
    lastSignalSeq: 0,
    moves: { started: 0, completed: 0, cancelled: 0, aborted: 0 },
    startedByOp: { follower_move: 0, owner_handoff: 0, follower_replace: 0 },
  };
}

export async function rebalancer(input: RebalancerInput): Promise<never> {
  const { settings } = input;
  const state: RebalancerState = input.state ?? initialRebalancerState();
  const startedByOp = (state.startedByOp ??= { follower_move: 0, owner_handoff: 0, follower_replace: 0 });
  let wake = false;
  let waitingFor = 'the first tick';

  const note = (request: PauseRequest): OperatorNote => ({ by: request.by.trim(), reason: request.reason.trim(), at: Date.now() });
  const status = (): RebalancerStatus => ({ ...state, state: state.paused ? 'paused' : 'running', waitingFor, settings, pinned: state.pinned ?? {}, excluded: state.excluded ?? {} });
  const refuseIf = (problem: string | null) => {
    if (problem) throw new Error(problem);
  };

  setHandler(topologySignal, (signal) => {
    state.lastSignalSeq = Math.max(state.lastSignalSeq, signal.seq);
    wake = true;
  });
  setHandler(rebalancerStatusQuery, status);
  setHandler(
    pauseUpdate,
    (request) => {
      state.paused = note(request);
      waitingFor = `a resume (paused by ${state.paused.by}: ${state.paused.reason})`;
      return status();
    },
    { validator: (request) => refuseIf(checkOperatorNote('pause', request, state.paused)) },
  );
  setHandler(
    resumeUpdate,
    (request) => {
      state.lastResumed = note(request);
      state.paused = null;
      wake = true;
      return status();
    },
    { validator: (request) => refuseIf(checkOperatorNote('resume', request, state.paused)) },
  );
  // Approval (REBALANCER_MODE=propose): its updates, and the plan a tick starts from in that mode.
  const approval = proposeMode(state, settings, { status, wake: () => (wake = true) });

  // Pins and exclusions live in the state, so they outlive workers, Temporal restarts and continue-as-new; the
  // maps are created by the first one set, so the loop's input and plan requests stay as they were without any.
  const hold = (action: HoldAction, id: string, request: PauseRequest): RebalancerStatus => {
    const holds = action === 'pin' || action === 'unpin' ? (state.pinned ??= {}) : (state.excluded ??= {});
    if (action === 'pin' || action === 'exclude') holds[id.trim()] = note(request);
    else {
      delete holds[id.trim()];
      // A lifted hold may free a step the last plan could not take.
      wake = true;
    }
    return status();
  };
  const checkPin = (action: HoldAction, request: PinRequest | undefined) => refuseIf(checkHold(action, request?.partition, request, state.pinned ?? {}));
  const checkExclusion = (action: HoldAction, request: ExcludeRequest | undefined) => refuseIf(checkHold(action, request?.node, request, state.excluded ?? {}));
  setHandler(pinUpdate, (r) => hold('pin', r.partition, r), { validator: (r) => checkPin('pin', r) });
  setHandler(unpinUpdate, (r) => hold('unpin', r.partition, r), { validator: (r) => checkPin('unpin', r) });
  setHandler(excludeUpdate, (r) => hold('exclude', r.node, r), { validator: (r) => checkExclusion('exclude', r) });
  setHandler(includeUpdate, (r) => hold('include', r.node, r), { validator: (r) => checkExclusion('include', r) });

  async function tick(): Promise<void> {
    state.ticks++;
    // Paused with nothing in flight, there is nothing to learn from the broker.
    if (state.paused && state.inFlight.length === 0) return;
    const looked = Date.now();
    // The partition cooldowns stay in the worker's book (`coolFor`), which the plan reads: they grow with the moves
    // made within a cooldown, past what a workflow should carry (docs/scale.md).
    const snapshot = await rebalancerSnapshot(state.inFlight, null, closedListFrom(state.lookedAt, looked, settings.planner), settings.planner.partitionCooldownMs);
    const now = Date.now();
    const ended = recordEnded(state.inFlight, snapshot.ended, state.cooldowns, state.moves, now, settings.planner);
    state.inFlight = ended.inFlight;
    state.moves = ended.counts;
    // A snapshot recorded by an older run lists no closed reconfigurations.
    // A node that arrived lifts the node cooldowns, those of what this look lists closed included (see recordClosed).
    // No patch: the cooldowns only feed the planner's local activity, whose recorded result a replay uses, so no
    // command changes; and a patch right after this local activity's result would itself break replay (a query can
    // hand the result over a task later in the first run than on replay, moving the marker).
    if (nodeArrived(state.activeNodes, snapshot.active)) state.nodeCooldownsFrom = now;
    state.cooldowns = nodeCooldowns(pruneCooldowns(recordClosed(ended.cooldowns, snapshot.closed ?? [], settings.planner, state.nodeCooldownsFrom), now));
    if (state.nodeCooldownsFrom === now) state.cooldowns = cooldownsOnArrival(state.cooldowns, state.activeNodes, snapshot.active);
    state.cooling = snapshot.cooling;
    state.lookedAt = looked;
    if (snapshot.active !== undefined) state.activeNodes = snapshot.active;
    if (state.paused) return;

    const base = { at: now, steps: [], started: [], skipped: [], spreadBefore: 0, spreadAfter: 0, mean: 0, threshold: settings.planner.threshold, planningMs: 0 };
    const pending = snapshot.recoveryPending;
    if (pending) {
      state.lastPlan = { ...base, idleReason: `paused while a recovery is pending: ${pending}` };
      waitingFor = `the recovery to activate (${pending})`;
      return;
    }
    const plan = settings.mode === 'propose' ? await approval.plan(snapshot.inFlight, now) : await planMoves({ inFlight: snapshot.inFlight, cooldowns: state.cooldowns, now, cooled: true, ...planHolds(state) }, settings.planner);
    const selection = selectStarts(plan.steps, snapshot.inFlight, settings.planner, new Set(snapshot.draining));
    const started: string[] = [];
    const skipped = [...selection.skipped];
    // A pause, a pin or an exclusion accepted while this tick ran stops the steps not yet started.
    const hold = (step: Proposal): string | null => (state.paused ? 'the rebalancer was paused' : operatorHold(step, state.pinned, state.excluded));
    await startMoves(selection.start, 'planner', now, hold, (step, result) => {
      if ('skipped' in result) {
        skipped.push({ partition: step.partition, reason: result.skipped });
        return;
      }
      state.inFlight.push(result.move);
      state.moves.started++;
      // A state carried from a run before repairs has no count for them yet.
      startedByOp[step.op] = (startedByOp[step.op] ?? 0) + 1;
      started.push(step.partition);
      void result.handle.result().then(
        () => (wake = true),
        () => (wake = true),
      );
    });
    approval.started(started);
    const idleReason = started.length > 0 ? null : (plan.idleReason ?? (skipped.length > 0 ? `no planned step could start: ${skipped[0]!.reason}` : 'the planner proposed nothing'));
    state.lastPlan = planRecord(now, { ...plan, threshold: settings.planner.threshold }, started, skipped, idleReason);
    waitingFor = 'the next tick';
  }

  for (let i = 0; i < settings.ticksPerRun && !workflowInfo().continueAsNewSuggested; i++) {
    wake = false;
    await tick();
    if (state.paused) waitingFor = `a resume (paused by ${state.paused.by}: ${state.paused.reason})`;
    await condition(() => wake, settings.tickMs);
  }
  await condition(allHandlersFinished);
  return continueAsNew<typeof rebalancer>({ settings, state });
}
