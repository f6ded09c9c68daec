/**
 * One reconfiguration as an operator sees it: its status (query), its phase (search attribute and current
 * details), an operator's cancel (update, or a Temporal cancel request) and how it ends. Every workflow type
 * built on the steps ends in the matching Temporal status (see MoveOutcome in rules/definitions.ts).
 */
import {
  ApplicationFailure,
  CancellationScope,
  CancelledFailure,
  log,
  setCurrentDetails,
  setHandler,
  upsertMemo,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import {
  cancelUpdate,
  statusQuery,
  type CancelRequest,
  type MoveOrigin,
  type MoveOutcome,
  type MovePhase,
  type MoveStatus,
  type MoveTiming,
  type ReconfigurationKind,
} from '../../rules/definitions';
import { KindKey, PartitionKey, PhaseKey, PhaseSinceKey, SourceKey, TargetKey } from '../../rules/search-attributes';
import { OUTCOME_MEMO, takes, watchPatches } from './patches';
import { DEFAULT_TIMING, Watch } from './watch';

export interface OperationSubject {
  kind: ReconfigurationKind;
  partition: string;
  from: string | null;
  to: string;
  origin: MoveOrigin;
}

export class Operation {
  /** What the status query shows; changed only by the methods below. */
  private readonly status: MoveStatus;
  /** Set by an operator's cancel (update or Temporal request) while the operation can still be undone. */
  private cancelled: string | null = null;
  /** Once set, a cancel is refused with these words (the operation is past its point of no return); null: accepted for now. */
  private noWayBack: (() => string | null) | null = null;
  /** The phase the search attribute shows. */
  private shownPhase: string | undefined;
  /** Temporal delivered a cancel request to this run: only then can it end as Canceled. */
  private cancelRequested = false;

  constructor(
    readonly subject: OperationSubject,
    readonly watch: Watch,
    /** Why it was asked for, for the start's log line. */
    private readonly reason?: string,
    /** Its workflow type folded the step library's patches: it takes them without asking (`takes` in patches.ts). */
    private readonly folded = false,
  ) {
    this.status = {
      kind: subject.kind,
      partition: subject.partition,
      from: subject.from,
      to: subject.to,
      origin: subject.origin,
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
    watch.reportBlocked((reason) => this.block(reason));
  }

  /** Install the status query, the cancel update and the Temporal cancel handling; show the search attributes. */
  start(): void {
    const attrs = workflowInfo().typedSearchAttributes;
    this.shownPhase = attrs.get(PhaseKey);
    // The starter sets them (no event); a starter that did not gets them here, once.
    if (attrs.get(KindKey) === undefined) {
      upsertSearchAttributes([
        { key: PartitionKey, value: this.subject.partition },
        { key: KindKey, value: this.subject.kind },
        { key: PhaseKey, value: this.status.phase },
        { key: PhaseSinceKey, value: new Date() },
        ...(this.subject.from === null ? [] : [{ key: SourceKey, value: this.subject.from }]),
        { key: TargetKey, value: this.subject.to },
      ]);
      this.shownPhase = this.status.phase;
    }
    setHandler(statusQuery, () => this.snapshot());
    setHandler(
      cancelUpdate,
      ({ reason }) => {
        this.requestCancel(reason || 'cancelled by an operator');
        return { accepted: true as const, phase: this.status.phase };
      },
      {
        validator: (_request: CancelRequest) => {
          if (this.status.outcome !== null) {
            throw ApplicationFailure.nonRetryable(`refused: the ${this.subject.kind} already ended (${this.status.outcome.status})`, 'CancelRefused');
          }
          const refused = this.noWayBack?.();
          if (refused) throw ApplicationFailure.nonRetryable(refused, 'CancelRefused');
        },
      },
    );
    // A cancel from the Temporal UI or API is an operator cancel; cleanup must still run, so bodies run in a
    // non-cancellable scope (`run`) and only read the reason.
    CancellationScope.current().cancelRequested.catch(() => {
      this.cancelRequested = true;
      if (this.noWayBack?.()) log.warn(`cancel requested past the point of no return: ignored, the ${this.subject.kind} can only finish`);
      else this.requestCancel('cancelled through Temporal');
    });
  }

  /** Whether this execution takes patch `id`'s new branch (`takes` in patches.ts). */
  takes(id: string): boolean {
    return takes(id, this.folded);
  }

  get cancelReason(): string | null {
    return this.cancelled;
  }

  /** An operator's cancel (the cancel update or a Temporal cancel request): the steps' interrupts end the wait. */
  requestCancel(reason: string): void {
    this.cancelled ??= reason;
    this.watch.changed();
  }

  /** From here on a cancel is refused with these words (they say why and what the way on is); null accepts it for now. */
  refuseCancel(why: () => string | null): void {
    this.noWayBack = why;
  }

  /** A new stage that a cancel can undo again (an owner move's handoff, once its follower move completed). */
  acceptCancel(): void {
    this.noWayBack = null;
  }

  get phase(): MovePhase {
    return this.status.phase;
  }

  /** Boundary B once a swap was accepted: T counts from there. */
  get boundary(): number | null {
    return this.status.boundary;
  }

  /** A swap was accepted at boundary B. */
  swappedAt(boundary: number): void {
    this.status.boundary = boundary;
  }

  /** Fields of the status that only some kinds show (an owner move's stage, a handoff's final boundary). */
  show(fields: Partial<Pick<MoveStatus, 'stage' | 'via' | 'finalBoundary' | 'admissionClosedMs'>>): void {
    Object.assign(this.status, fields);
  }

  snapshot(): MoveStatus {
    const target = this.watch.replica(this.subject.to);
    return {
      ...this.status,
      generation: this.watch.generation || null,
      epoch: this.watch.epoch || null,
      targetDurable: target.durable >= 0 ? target.durable : null,
      bytesRemaining: target.durable >= 0 ? target.bytesRemaining : null,
    };
  }

  /** Enter a phase: shown in the status, and as a search attribute (one upsert per change). */
  setPhase(phase: MovePhase): void {
    if (this.status.phase === phase) return;
    this.status.phase = phase;
    // A blocking reason belongs to the phase that gave it.
    this.status.blockingReason = null;
    this.showPhase();
  }

  /** The operation waits, for these words (the status and the workflow's current details show them). */
  block(reason: string): void {
    if (this.status.blockingReason === reason) return;
    this.status.blockingReason = reason;
    setCurrentDetails(`**${this.status.phase}**: ${reason}`);
  }

  /** A step tried again after a passing refusal or a recovery. */
  retried(reason: string): void {
    this.status.retries++;
    this.block(reason);
  }

  /**
   * The phase and when it began, in one upsert. No patch guards the added key: replay matches an upsert command
   * by its type alone (sdk-core's upsert state machine never compares the attributes), so histories recorded
   * before it replay unchanged, and a patch would cost every move a marker and its own upsert.
   */
  private showPhase(): void {
    if (this.shownPhase === this.status.phase) return;
    this.shownPhase = this.status.phase;
    upsertSearchAttributes([
      { key: PhaseKey, value: this.status.phase },
      { key: PhaseSinceKey, value: new Date() },
    ]);
  }

  /**
   * Run the operation's body to its outcome and end the workflow in the matching Temporal status: completed
   * returns the outcome; aborted throws a non-retryable ApplicationFailure typed by the outcome's code (Failed),
   * the outcome as details[0]; cancelled throws a CancelledFailure with the outcome as details[0]. The server
   * closes a run as Canceled only when it received a Temporal cancel request (tried on the dev server: thrown
   * without one, the run closes Failed with the CancelledFailure as cause, and a run cannot cancel itself). The
   * memo holds the outcome however the run ends (`outcome`).
   */
  async run(body: () => Promise<MoveOutcome>): Promise<MoveOutcome> {
    const { kind, partition, from, to, origin } = this.subject;
    const info = workflowInfo();
    // One line when the move starts and one when it ends, for a person reading the worker's log (a replay logs
    // neither); a run continued from another started nothing new.
    if (info.continuedFromExecutionRunId === undefined) log.info(`${kind} of ${partition} started: ${from ?? 'a new copy'} -> ${to} (${origin})`, { origin, reason: this.reason });
    const outcome = { kind, ...(await CancellationScope.nonCancellable(body)) } as MoveOutcome;
    this.status.outcome = outcome;
    this.setPhase(outcome.status);
    // An ended workflow no longer shows its last waiting reason.
    setCurrentDetails('');
    const durationMs = Date.now() - info.startTime.getTime();
    const why = outcome.status === 'completed' ? '' : `: ${outcome.status === 'aborted' ? `${outcome.code}, ` : ''}${outcome.reason}`;
    log.info(`${kind} of ${partition} ${outcome.status} after ${(durationMs / 1000).toFixed(1)} s${why}`, { outcome, durationMs });
    // The memo carries the outcome to visibility and describe, so a list of ended moves (the dashboard's recent ones)
    // or the loop learning how its moves ended reads no history. A Canceled close keeps no details (nor does the
    // SDK send any), so a cancelled run's memo kept its outcome before every run's did.
    if (this.takes(OUTCOME_MEMO)) upsertMemo({ outcome });
    else if (outcome.status === 'cancelled' && this.cancelRequested) upsertMemo({ outcome });
    if (outcome.status === 'cancelled') throw new CancelledFailure(outcome.reason, [outcome]);
    if (outcome.status === 'aborted') throw ApplicationFailure.nonRetryable(outcome.reason, outcome.code, outcome);
    return outcome;
  }
}

/**
 * An operation with its watch listening for the relay's signals and its status query and cancel installed; `folded`
 * for a workflow type that folded the step library's patches (`followerMoveV3`).
 */
export function begin(subject: OperationSubject, request: { timing?: Partial<MoveTiming>; reason?: string }, folded = false): Operation {
  // Asked once, first: an execution from before the patch keeps its local-activity reads and clock decisions
  // for its whole life, so its history replays.
  const patches = watchPatches(folded);
  const watch = new Watch(subject.partition, { ...DEFAULT_TIMING, ...request.timing }, patches);
  const op = new Operation(subject, watch, request.reason, folded);
  watch.listen();
  op.start();
  return op;
}
