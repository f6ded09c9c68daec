/**
 * The conformance cases' checks and the plain facts about records they share: a failed check, a skip (a case
 * this broker cannot host), and request bodies that make sense for each guarded write.
 */
import { isDeepStrictEqual } from 'node:util';
import { GuardedWrites, type GuardedWriteName, type GuardedWriteRequest, type Partition } from '../contract';

export type GuardFree<N extends GuardedWriteName> = Omit<GuardedWriteRequest<N>, 'expectedGeneration' | 'idempotencyKey'>;

export class CheckFailed extends Error {
  override name = 'CheckFailed';
}

/** Thrown by a case this broker cannot host (reported as skipped with the reason, never as passed). */
export class Skip extends Error {
  override name = 'Skip';
}

export function check(condition: unknown, message: string): asserts condition {
  if (!condition) throw new CheckFailed(message);
}

export function checkEqual(actual: unknown, expected: unknown, what: string): void {
  if (!isDeepStrictEqual(actual, expected)) {
    throw new CheckFailed(`${what}: expected ${show(expected)}, got ${show(actual)}`);
  }
}

export function show(value: unknown): string {
  const text = JSON.stringify(value);
  return text === undefined ? String(value) : text.length > 400 ? `${text.slice(0, 400)}...` : text;
}

/** Every node that holds an assigned copy of the partition (retained copies are not assigned). */
export function replicasOf(p: Partition): string[] {
  const nodes = [p.owner, ...p.followers, ...p.learners];
  if (p.leaving !== null) nodes.push(p.leaving);
  return nodes;
}

/** Body shapes for each write, so cases can send every write with plausible arguments. */
export function plausibleBody(
  write: GuardedWriteName,
  p: Partition,
  spare: string,
): GuardFree<GuardedWriteName> {
  const follower = p.followers[0] ?? p.owner;
  const bodies: { [N in GuardedWriteName]: GuardFree<N> } = {
    'add-learner': { node: spare },
    'drop-learner': { node: p.learners[0] ?? spare },
    swap: { learner: p.learners[0] ?? spare, leaving: follower },
    'remove-leaving': { node: p.leaving ?? follower },
    'promote-learner': { node: p.learners[0] ?? spare },
    'close-admission': {},
    'commit-owner': { newOwner: follower, certificate: { finalBoundary: 0, epoch: p.epoch } },
    'reopen-admission': {},
  };
  return bodies[write];
}

export const WRITE_NAMES = Object.keys(GuardedWrites) as GuardedWriteName[];
