/**
 * Move the follower copy of one queue partition from R to T without a fence (the note's "Moving a
 * follower: two steps"): step 0 adds T as a learner, the broker catches it up and admits it; step 1 swaps
 * who counts and keeps boundary B; step 2 removes R once T is durable at or beyond B. Before the swap every
 * abort is clean (drop the learner); after it the only ways on are finishing or ordinary recovery.
 *
 * Longer than most files on purpose: one workflow function whose steps share the move's state (what the
 * broker said, the status an operator queries) as closures; the pure rules live in rules/follower-move-rules.ts.
 */
import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  condition,
  log,
  patched,
  proxyActivities,
  proxyLocalActivities,
  setCurrentDetails,
  setHandler,
  sleep,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities, MoveContext } from '../../activities';
import type { GuardedWriteName, PartitionView, WriteReply } from '../../cluster/contract';
import { legacyNow } from '../steps/legacy-clock';
import {
  admittedSignal,
  cancelUpdate,
  nodeSignal,
  progressSignal,
  recoverySignal,
  statusQuery,
  type CancelRequest,
  type FollowerMoveRequest,
  type MoveOutcome,
  type MovePhase,
  type MoveStatus,
  type MoveTiming,
} from '../../rules/definitions';
import { checkFollowerMove, classifyRemovalRefusal, TargetWatch, type TargetReport } from '../../rules/follower-move-rules';
import { formatBytes } from '../../rules/format';
import { PhaseKey } from '../../rules/search-attributes';

export const DEFAULT_TIMING: MoveTiming = {
  stallReportMs: 30_000,
  stallAbortMs: 10 * 60_000,
  catchUpBaseMs: 10 * 60_000,
  catchUpFloorBytesPerSec: 1_000_000,
  pollMs: 30_000,
  retryMs: 2_000,
};

const ACTIVITY_OPTIONS = {
  startToCloseTimeout: '10s',
  // Broker unreachable or restarting: keep trying.
  retry: { initialInterval: '500ms', backoffCoefficient: 2, maximumInterval: '10s' },
} as const;
// A read is a local activity: it runs inside the workflow task, with no extra round trips through the
// server, and reading twice after a crash is harmless.
const { readMoveContext } = proxyLocalActivities<Activities>(ACTIVITY_OPTIONS);
// A guarded write is a normal activity: the server records its input, so every retry sends the same body
// under the same idempotency key and gets the first reply back. (As a local activity, a worker crash would
// re-run the workflow task, which may compute another expected generation for the same key.)
const { guardedWrite } = proxyActivities<Activities>(ACTIVITY_OPTIONS);

/** Refusals that pass by themselves: wait a little and try again. */
const PASSING = new Set(['no_sync_budget', 'generation_mismatch', 'injected', 'not_caught_up', 'change_in_flight']);

/**
 * An activity the broker rejected for good (a 4xx that is not a typed refusal): retrying cannot help. A local
 * activity's failure reaches the workflow as the ApplicationFailure itself (`direct`: recognise that too).
 */
function rejection(err: unknown, direct: boolean): ApplicationFailure | null {
  if (err instanceof ActivityFailure && err.cause instanceof ApplicationFailure) return err.cause;
  return direct && err instanceof ApplicationFailure ? err : null;
}

type Interrupt = 'recovery' | 'cancel' | 'target_down' | 'stalled' | 'deadline';

export async function followerMove(request: FollowerMoveRequest): Promise<MoveOutcome> {
  const timing: MoveTiming = { ...DEFAULT_TIMING, ...request.timing };
  const { partition, from: R, to: T } = request;
  const info = workflowInfo();
  // Rules added while moves were running, each taken once at the start so a move keeps one set of rules for
  // its whole life (docs/versioning.md, "Patches").
  const progressRule = patched('progress-any-signal');
  const refusalRule = patched('final-refusals');
  const cleanupRule = patched('cleanup-every-exit');

  const status: MoveStatus = {
    kind: 'follower-move',
    partition,
    from: R,
    to: T,
    origin: request.origin,
    phase: 'validating',
    bytesRemaining: null,
    boundary: null,
    targetDurable: null,
    blockingReason: null,
    epoch: null,
    generation: null,
    retries: 0,
    outcome: null,
  };

  // What the workflow knows of the broker, kept from replies, reads and signals (progress is a maximum).
  let generation = 0;
  let epoch = 0;
  let targetAdmitted = false;
  /** Generation of the add-learner write: an `admitted` event older than it is from an earlier learner. */
  let learnerAddedAt = -1;
  let targetLive = true;
  /** Highest feed sequence of a node signal seen, per node: older ones arrive late and are ignored. */
  const nodeSeq = new Map<string, number>();
  let recoveryPending = false;
  /** The epoch a pending recovery replaces: only an activation past it clears the pending state. */
  let recoveringEpoch = -1;
  let cancelReason: string | null = null;
  const watch = new TargetWatch(!progressRule, legacyNow());
  let version = 0;
  let writeSeq = 0;
  // The catch-up deadline grows with the largest transfer T has reported in this attempt (the first
  // report comes after the add-learner write), like PD's step timeouts proportional to the bytes moved.
  let catchUpStartedAt = legacyNow();
  let bytesToCopy = 0;

  const noteGeneration = (g: number | undefined): void => {
    if (g !== undefined && g > generation) generation = g;
    status.generation = generation;
  };
  const noteTarget = (report: TargetReport): void => {
    const { durableOffset: durable, bytesRemaining } = report;
    bytesToCopy = Math.max(bytesToCopy, bytesRemaining);
    if (durable > (status.targetDurable ?? -1)) {
      status.targetDurable = durable;
      status.bytesRemaining = bytesRemaining;
    } else if (durable === status.targetDurable) {
      status.bytesRemaining = Math.min(status.bytesRemaining ?? bytesRemaining, bytesRemaining);
    }
    watch.note(report, legacyNow());
  };
  const absorb = (view: PartitionView, nodes?: MoveContext['nodes']): void => {
    epoch = Math.max(epoch, view.partition.epoch);
    status.epoch = epoch;
    // A view may be older than a signal already handled (an activity result applied after a signal in the
    // same activation): it never takes back what a newer generation or epoch told us.
    const fresh = view.partition.generation >= generation;
    noteGeneration(view.partition.generation);
    if (view.partition.pendingRecovery) {
      recoveryPending = true;
      recoveringEpoch = Math.max(recoveringEpoch, view.partition.pendingRecovery.epoch);
    } else if (view.partition.epoch > recoveringEpoch) {
      recoveryPending = false;
    }
    const admitted = view.partition.history.some((h) => h.node === T && !h.suspended);
    if (fresh || admitted) targetAdmitted = admitted;
    const t = view.progress.replicas.find((r) => r.node === T);
    if (t) {
      noteTarget({
        durableOffset: t.durableOffset,
        bytesRemaining: t.bytesRemaining,
        phase: t.phase,
        // The broker's clock is not the workflow's: carry over how long ago the stall began.
        stalledSince: t.stalledSince === null ? null : legacyNow() - Math.max(0, view.progress.now - t.stalledSince),
        pausedForRecovery: t.pausedForRecovery,
      });
    }
    if (nodes) targetLive = nodes.find((n) => n.id === T)?.live ?? false;
    else if (t) targetLive = t.live;
    version++;
  };

  setHandler(statusQuery, () => status);
  setHandler(progressSignal, (p) => {
    noteGeneration(p.generation);
    const t = p.replicas.find((r) => r.node === T);
    if (t) noteTarget({ ...t, stalledSince: t.stalled ? legacyNow() : null });
    version++;
  });
  setHandler(admittedSignal, (a) => {
    noteGeneration(a.generation);
    if (a.node === T && a.generation > learnerAddedAt) targetAdmitted = true;
    version++;
  });
  setHandler(recoverySignal, (r) => {
    if (r.state === 'opened' && r.epoch >= epoch) {
      recoveryPending = true;
      recoveringEpoch = Math.max(recoveringEpoch, r.epoch);
    }
    if (r.state === 'activated' && r.epoch > recoveringEpoch) {
      recoveryPending = false;
      epoch = r.epoch;
      status.epoch = epoch;
      noteGeneration(r.generation);
    }
    version++;
  });
  setHandler(nodeSignal, (n) => {
    if (n.seq !== undefined) {
      if (n.seq < (nodeSeq.get(n.node) ?? -1)) return;
      nodeSeq.set(n.node, n.seq);
    }
    if (n.node === T) targetLive = n.live;
    version++;
  });
  setHandler(
    cancelUpdate,
    ({ reason }) => {
      cancelReason ??= reason || 'cancelled by an operator';
      version++;
      return { accepted: true as const, phase: status.phase };
    },
    {
      validator: (_request: CancelRequest) => {
        if (status.boundary !== null) {
          throw ApplicationFailure.nonRetryable(
            `refused: ${partition} already counts ${T} instead of ${R} (swap at boundary ${status.boundary}); ` +
              `undoing it would need another swap. The move will finish by removing ${R} once ${T} is durable at ` +
              `${status.boundary} (now ${status.targetDurable ?? 'unknown'}); ${R} keeps its data until then. ` +
              `To put the copy back, wait for this move to complete and move it from ${T} to ${R}.`,
            'CancelRefused',
          );
        }
        if (status.outcome !== null) {
          throw ApplicationFailure.nonRetryable(`refused: the move already ended (${status.outcome.status})`, 'CancelRefused');
        }
      },
    },
  );
  // Cancellation from the Temporal UI or API is an operator cancel; cleanup must still run, so the body
  // below runs in a non-cancellable scope and only reads this flag.
  CancellationScope.current().cancelRequested.catch(() => {
    if (status.boundary === null) cancelReason ??= 'cancelled through Temporal';
    else log.warn('cancel requested after the swap: ignored, the move can only finish', { partition });
    version++;
  });

  const setPhase = (phase: MovePhase): void => {
    if (status.phase === phase) return;
    status.phase = phase;
    // A blocking reason belongs to the phase that gave it.
    status.blockingReason = null;
    upsertSearchAttributes([{ key: PhaseKey, value: phase }]);
  };
  const block = (reason: string | null): void => {
    if (status.blockingReason === reason) return;
    status.blockingReason = reason;
    setCurrentDetails(reason ? `**${status.phase}**: ${reason}` : `**${status.phase}**`);
  };
  const finish = (outcome: MoveOutcome): MoveOutcome => {
    status.outcome = outcome;
    block(null);
    setPhase(outcome.status);
    log.info(`move of ${partition} ${R}->${T} ${outcome.status}`, { outcome });
    return outcome;
  };

  const read = async (): Promise<MoveContext> => {
    const ctx = await readMoveContext(partition);
    absorb(ctx.view, ctx.nodes);
    return ctx;
  };

  const write = async <N extends GuardedWriteName>(name: N, body: Record<string, unknown>, summary: string): Promise<WriteReply> => {
    writeSeq += 1;
    const idempotencyKey = `${info.workflowId}/${info.runId}/${writeSeq}-${name}`;
    const reply = await guardedWrite.executeWithOptions(
      { ...ACTIVITY_OPTIONS, summary },
      // The activity's generic signature does not survive proxying; the body matches `name`'s schema.
      [partition, name, { ...body, expectedGeneration: generation, idempotencyKey } as never],
    );
    if (reply.ok) {
      noteGeneration(reply.partition.generation);
      epoch = Math.max(epoch, reply.partition.epoch);
    } else {
      const current = reply.refusal.saw['current'];
      if (reply.refusal.code === 'generation_mismatch' && typeof current === 'number') noteGeneration(current);
      if (reply.refusal.code === 'pending_recovery') {
        recoveryPending = true;
        recoveringEpoch = Math.max(recoveringEpoch, epoch);
      }
    }
    return reply;
  };

  // One poll timer at a time, whatever signals arrive meanwhile: the broker is re-read every pollMs while
  // the move waits, so a delayed or dropped event costs at most pollMs (and no timer per signal).
  let pollDue = false;
  let pollArmed = false;
  const armPoll = (): void => {
    if (pollArmed) return;
    pollArmed = true;
    void sleep(timing.pollMs).then(() => {
      pollArmed = false;
      pollDue = true;
      version++;
    });
  };

  /** Wait until `done` or an interrupt, re-reading the broker when the poll timer is due. */
  const waitFor = async (done: () => boolean, interrupts: () => Interrupt | null, describe: () => string): Promise<Interrupt | null> => {
    for (;;) {
      if (done()) return null;
      const why = interrupts();
      if (why) return why;
      block(describe());
      if (pollDue) {
        pollDue = false;
        await read();
        continue;
      }
      armPoll();
      const seen = version;
      await condition(() => version !== seen);
    }
  };

  const stalledFor = (): number => watch.stalledFor(legacyNow());
  const passing = (code: string): boolean => PASSING.has(code) || (refusalRule && code === 'admission_closed');

  /** Before the swap: a recovery, a cancel, T failing or T stalling ends this attempt. */
  const catchUpDeadline = (): number =>
    catchUpStartedAt +
    watch.pausedFor(legacyNow()) +
    timing.catchUpBaseMs +
    Math.ceil((bytesToCopy / timing.catchUpFloorBytesPerSec) * 1000);

  const beforeSwapInterrupt = (): Interrupt | null => {
    if (recoveryPending) return 'recovery';
    if (cancelReason !== null) return 'cancel';
    if (!targetLive) return 'target_down';
    if (stalledFor() >= timing.stallAbortMs) return 'stalled';
    if (legacyNow() >= catchUpDeadline()) return 'deadline';
    return null;
  };

  const catchUpReason = (): string => {
    const left = formatBytes(status.bytesRemaining);
    if (watch.paused) return `transfer to ${T} paused: recovery transfers on ${T} come first (${left} remaining; paused time counts toward neither the stall nor the catch-up limit)`;
    if (stalledFor() >= timing.stallReportMs || watch.stalledAtBroker) {
      return `${T} is stalled: no progress for ${Math.round(stalledFor() / 1000)}s, ${left} remaining (aborts after ${Math.round(timing.stallAbortMs / 1000)}s)`;
    }
    return `waiting for ${T} to catch up: ${left} remaining, durable at ${status.targetDurable ?? 0}`;
  };

  const waitForActivation = async (): Promise<void> => {
    setPhase('waiting_for_recovery');
    await waitFor(
      () => !recoveryPending,
      () => null,
      () => `pending recovery on ${partition}: the partition takes no guarded write until it activates (epoch ${epoch} -> ${epoch + 1})`,
    );
  };

  /**
   * Drop the learner T. Runs whatever happens: non-cancellable by construction of the body. Says what became
   * of the learner, for the outcome's reason.
   */
  const dropLearner = async (): Promise<string> => {
    const notDropped = (why: string): string => {
      log.warn(`could not drop learner ${T}: ${why}`);
      return `the learner ${T} could not be dropped (${why}): drop it with the guarded write drop-learner`;
    };
    setPhase('cleaning_up');
    for (;;) {
      let reply: WriteReply;
      try {
        if (recoveryPending) await waitForActivation();
        reply = await write('drop-learner', { node: T }, `drop learner ${T}`);
      } catch (err) {
        const cause = rejection(err, cleanupRule);
        if (!cleanupRule || !cause) throw err;
        return notDropped(cause.message);
      }
      if (reply.ok || reply.refusal.code === 'not_a_learner') return 'the learner was dropped before the swap';
      if (reply.refusal.code === 'pending_recovery' || passing(reply.refusal.code)) {
        status.retries++;
        block(`dropping learner ${T}: ${reply.refusal.message}`);
        await condition(() => false, timing.retryMs);
        continue;
      }
      return notDropped(reply.refusal.message);
    }
  };

  const cancelBeforeSwap = async (): Promise<MoveOutcome> => {
    await dropLearner();
    return finish({ status: 'cancelled', partition, reason: cancelReason ?? 'cancelled' });
  };

  /** Abort before the swap: nothing counted changed, and the learner goes. */
  const abortBeforeSwap = async (code: string, why: string): Promise<MoveOutcome> => {
    const left = await dropLearner();
    return finish({ status: 'aborted', partition, code, reason: `${why}; ${left}` });
  };

  /** Steps 0 and 1, retried after a recovery: an outcome when the move ended, null once the swap happened. */
  const beforeSwap = async (first: MoveContext): Promise<MoveOutcome | null> => {
    let ctx = first;
    for (;;) {
      // ---- step 0: add T as a learner (or reuse it after a recovery).
      setPhase('adding_learner');
      while (!ctx.view.partition.learners.includes(T)) {
        if (cancelReason !== null) return finish({ status: 'cancelled', partition, reason: cancelReason });
        if (recoveryPending) {
          if (request.origin === 'planner') {
            return finish({ status: 'aborted', partition, code: 'pending_recovery', reason: `a recovery opened on ${partition} before ${T} was added; the planner decides again after activation` });
          }
          await waitForActivation();
          ctx = await read();
          continue;
        }
        const reply = await write('add-learner', { node: T }, `add learner ${T}`);
        if (reply.ok) {
          learnerAddedAt = reply.partition.generation;
          absorb({ partition: reply.partition, progress: ctx.view.progress });
          break;
        }
        const r = reply.refusal;
        if (r.code === 'pending_recovery') continue;
        if (!passing(r.code) || r.code === 'change_in_flight') {
          return finish({ status: 'aborted', partition, code: r.code, reason: `${T} was not added: ${r.message}` });
        }
        status.retries++;
        block(
          r.code === 'no_sync_budget'
            ? `waiting for sync budget on node ${String(r.saw['node'] ?? T)}: ${String(r.saw['inUse'] ?? '?')} of ${String(r.saw['limit'] ?? '?')} transfers in use` +
                (typeof r.saw['clusterInUse'] === 'number' ? ` (cluster: ${String(r.saw['clusterInUse'])} of ${String(r.saw['clusterLimit'])})` : '')
            : `retrying add-learner: ${r.message}`,
        );
        await condition(() => cancelReason !== null || recoveryPending, timing.retryMs);
      }

      // ---- T catches up in the background; the broker admits it to the accepted history.
      setPhase('catching_up');
      watch.restart(legacyNow());
      catchUpStartedAt = legacyNow();
      bytesToCopy = status.bytesRemaining ?? 0;
      let interrupt = await waitFor(() => targetAdmitted, beforeSwapInterrupt, catchUpReason);

      // ---- step 1: swap who counts.
      if (interrupt === null) {
        setPhase('swapping');
        for (;;) {
          const why = beforeSwapInterrupt();
          if (why) {
            interrupt = why;
            break;
          }
          const reply = await write('swap', { learner: T, leaving: R }, `swap: ${T} counts, ${R} leaving`);
          if (reply.ok) {
            status.boundary = reply.boundary ?? reply.partition.boundary?.offset ?? null;
            break;
          }
          const r = reply.refusal;
          if (r.code === 'pending_recovery') continue;
          // The broker's word that T is down: a failed target never starts to count.
          if (refusalRule && r.code === 'node_down') {
            targetLive = false;
            interrupt = 'target_down';
            break;
          }
          if (!passing(r.code) && r.code !== 'not_admitted') {
            return abortBeforeSwap(r.code, `the swap was refused: ${r.message}`);
          }
          status.retries++;
          block(`retrying the swap: ${r.message}`);
          await condition(() => cancelReason !== null || recoveryPending || !targetLive, timing.retryMs);
        }
      }
      if (status.boundary !== null) return null;

      // ---- an abort before the swap: nothing counted changed.
      switch (interrupt) {
        case 'cancel':
          return cancelBeforeSwap();
        case 'target_down':
          return abortBeforeSwap('target_down', `${T} failed before the swap; nothing counted changed`);
        case 'stalled':
          return abortBeforeSwap('stalled', `${T} made no progress for ${Math.round(stalledFor() / 1000)}s`);
        case 'deadline':
          return abortBeforeSwap('catch_up_timeout', `${T} did not catch up within the time allowed for ${formatBytes(bytesToCopy)}`);
        case 'recovery':
        case null:
          break;
      }
      // A recovery cancels the move; an operator's move waits for activation and tries again under the new
      // epoch, reusing T if it is still a learner; a planner's move ends and the planner decides again.
      await waitForActivation();
      if (request.origin === 'planner' || cancelReason !== null) {
        if (cancelReason !== null) return cancelBeforeSwap();
        return abortBeforeSwap('pending_recovery', `a recovery on ${partition} cancelled the move before the swap`);
      }
      status.retries++;
      ctx = await read();
      const again = checkFollowerMove(
        { ...ctx.view.partition, learners: ctx.view.partition.learners.filter((n) => n !== T) },
        ctx.nodes,
        R,
        T,
      );
      if (!again.ok) return abortBeforeSwap(again.code, `after the recovery the move no longer applies: ${again.message}`);
    }
  };

  /** The move cannot finish by itself past the swap: end it saying what holds and what the operator can do. */
  const stuckAfterSwap = (B: number, code: string, why: string): MoveOutcome =>
    finish({
      status: 'aborted',
      partition,
      code,
      reason:
        `${why}. ${T} counts since the swap at boundary ${B}; ${R} stays leaving, eligible and keeps its data, so ` +
        `nothing is lost. Fix what the broker names, then remove ${R} with the guarded write remove-leaving.`,
    });

  /** Step 2, past the swap: finish or go through recovery; nothing cancels this part. */
  const afterSwap = async (B: number): Promise<MoveOutcome> => {
    setPhase('covering_boundary');
    for (;;) {
      await waitFor(
        // R goes only while T is live: with T down, R is the copy that keeps W live counted copies.
        () => (status.targetDurable ?? -1) >= B && !recoveryPending && (targetLive || !refusalRule),
        () => null,
        () =>
          recoveryPending
            ? `pending recovery on ${partition}: ${R} stays eligible and keeps its data; waiting for activation`
            : !targetLive
              ? `${T} is down after the swap: ${R} stays eligible and keeps its data; waiting for ${T} to return or for recovery`
              : `waiting for ${T} durable at ${B}: at ${status.targetDurable ?? 0}`,
      );
      // ---- step 2: remove R; it keeps its data as a retained copy for the grace period.
      setPhase('removing');
      const reply = await write('remove-leaving', { node: R }, `remove ${R} (${T} covers ${B})`);
      if (reply.ok) {
        return finish({ status: 'completed', partition, from: R, to: T, boundary: B, epoch });
      }
      const r = reply.refusal;
      const kind = refusalRule ? classifyRemovalRefusal(r, T) : r.code === 'not_leaving' ? 'not_leaving' : 'passing';
      if (kind === 'not_leaving') {
        const now = await read();
        const p = now.view.partition;
        if (p.leaving === null && !p.history.some((h) => h.node === R) && p.followers.includes(T)) {
          return finish({ status: 'completed', partition, from: R, to: T, boundary: B, epoch });
        }
        return finish({ status: 'aborted', partition, code: r.code, reason: `${R} is no longer leaving ${partition}: ${r.message}` });
      }
      if (kind === 'final') return stuckAfterSwap(B, r.code, `the broker refused to remove ${R} for a reason that does not pass by itself: ${r.message}`);
      status.retries++;
      setPhase('covering_boundary');
      if (kind === 'target_down') {
        // Wait (above) until a signal or a poll says T is back.
        targetLive = false;
        continue;
      }
      // The broker's word on T's durable offset wins over what signals said (a lost disk can lower it).
      if (r.code === 'boundary_not_covered') await read().then(({ view }) => {
        status.targetDurable = view.progress.replicas.find((x) => x.node === T)?.durableOffset ?? null;
      });
      block(`retrying the removal of ${R}: ${r.message}`);
      const seen = version;
      await condition(() => version !== seen, timing.retryMs);
    }
  };

  const body = async (): Promise<MoveOutcome> => {
    // ---- validating: the same rules the CLI checked, against what the broker says now.
    let ctx: MoveContext;
    try {
      ctx = await read();
    } catch (err) {
      const cause = rejection(err, cleanupRule);
      if (cause) return finish({ status: 'aborted', partition, code: cause.type ?? 'rejected', reason: cause.message });
      throw err;
    }
    const check = checkFollowerMove(ctx.view.partition, ctx.nodes, R, T);
    if (!check.ok) return finish({ status: 'aborted', partition, code: check.code, reason: check.message });

    let ended: MoveOutcome | null;
    try {
      ended = await beforeSwap(ctx);
    } catch (err) {
      // Every exit before the swap drops the learner, a request the broker rejects for good included.
      const cause = rejection(err, cleanupRule);
      if (!cleanupRule || !cause || status.boundary !== null) throw err;
      return abortBeforeSwap(cause.type ?? 'rejected', `the broker rejected a request while ${status.phase.replace(/_/g, ' ')}: ${cause.message}`);
    }
    if (ended) return ended;
    const B = status.boundary!;
    try {
      return await afterSwap(B);
    } catch (err) {
      // Past the swap too, a request the broker rejects for good ends the move with its reason, not a failed workflow.
      const cause = rejection(err, cleanupRule);
      if (!cleanupRule || !cause) throw err;
      return stuckAfterSwap(B, cause.type ?? 'rejected', `the broker rejected a request while ${status.phase.replace(/_/g, ' ')}: ${cause.message}`);
    }
  };

  return CancellationScope.nonCancellable(body);
}
