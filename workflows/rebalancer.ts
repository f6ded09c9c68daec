/**
 * The rebalancer loop: one long-running workflow per broker and task queue (`rebalancerWorkflowId(scope)`).
 * While it is not paused and no recovery is pending, each tick takes a snapshot, asks the planner and starts
 * the planned follower moves and owner handoffs as reconfigurations that outlive it (origin `planner`), within
 * the transfer limits; cooldowns follow every completed reconfiguration, whoever started it. A topology signal
 * (node joined, up or down, draining, a recovery opened or activated) or an ended move wakes it at once;
 * otherwise it ticks on a timer.
 */
import { allHandlersFinished, condition, continueAsNew, setHandler, workflowInfo } from '@temporalio/workflow';
import {
  pauseUpdate,
  rebalancerStatusQuery,
  resumeUpdate,
  topologySignal,
  type OperatorNote,
  type PauseRequest,
  type RebalancerInput,
  type RebalancerState,
  type RebalancerStatus,
} from './definitions';
import { planMoves, rebalancerSnapshot, startMove } from './rebalancer-moves';
import { checkOperatorNote, closedListFrom, pruneCooldowns, recordClosed, recordEnded, selectStarts } from './rebalancer-rules';

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
    startedByOp: { follower_move: 0, owner_handoff: 0 },
  };
}

export async function rebalancer(input: RebalancerInput): Promise<never> {
  const { settings } = input;
  const state: RebalancerState = input.state ?? initialRebalancerState();
  const startedByOp = (state.startedByOp ??= { follower_move: 0, owner_handoff: 0 });
  let wake = false;
  let waitingFor = 'the first tick';

  const note = (request: PauseRequest): OperatorNote => ({ by: request.by.trim(), reason: request.reason.trim(), at: Date.now() });
  const status = (): RebalancerStatus => ({ ...state, state: state.paused ? 'paused' : 'running', waitingFor, settings });
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

  async function tick(): Promise<void> {
    state.ticks++;
    // Paused with nothing in flight, there is nothing to learn from the broker.
    if (state.paused && state.inFlight.length === 0) return;
    const looked = Date.now();
    const snapshot = await rebalancerSnapshot(state.inFlight, null, closedListFrom(state.lookedAt, looked, settings.planner));
    const now = Date.now();
    const ended = recordEnded(state.inFlight, snapshot.ended, state.cooldowns, state.moves, now, settings.planner);
    state.inFlight = ended.inFlight;
    state.moves = ended.counts;
    // A snapshot recorded by an older run lists no closed reconfigurations.
    state.cooldowns = pruneCooldowns(recordClosed(ended.cooldowns, snapshot.closed ?? [], settings.planner), now);
    state.lookedAt = looked;
    if (state.paused) return;

    const base = { at: now, steps: [], started: [], skipped: [], spreadBefore: 0, spreadAfter: 0, mean: 0, threshold: settings.planner.threshold, planningMs: 0 };
    const pending = snapshot.recoveryPending;
    if (pending) {
      state.lastPlan = { ...base, idleReason: `paused while a recovery is pending: ${pending}` };
      waitingFor = `the recovery to activate (${pending})`;
      return;
    }
    const plan = await planMoves({ inFlight: snapshot.inFlight, cooldowns: state.cooldowns, now }, settings.planner);
    const selection = selectStarts(plan.steps, snapshot.inFlight, settings.planner, new Set(snapshot.draining));
    const started: string[] = [];
    const skipped = [...selection.skipped];
    for (const step of selection.start) {
      // A pause accepted while this tick ran stops the steps not yet started.
      if (state.paused) {
        skipped.push({ partition: step.partition, reason: 'the rebalancer was paused' });
        continue;
      }
      const result = await startMove(step, 'planner', now);
      if ('skipped' in result) {
        skipped.push({ partition: step.partition, reason: result.skipped });
        continue;
      }
      state.inFlight.push(result.move);
      state.moves.started++;
      startedByOp[step.op]++;
      started.push(step.partition);
      void result.handle.result().then(
        () => (wake = true),
        () => (wake = true),
      );
    }
    const idleReason = started.length > 0 ? null : (plan.idleReason ?? (skipped.length > 0 ? `no planned step could start: ${skipped[0]!.reason}` : 'the planner proposed nothing'));
    state.lastPlan = { ...base, steps: plan.steps, started, skipped, idleReason, spreadBefore: plan.spreadBefore, spreadAfter: plan.spreadAfter, mean: plan.mean, planningMs: plan.planningMs };
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
