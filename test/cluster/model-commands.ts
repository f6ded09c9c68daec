/**
 * The commands of the model-based tests and their generator: which partition a step or a fault names, whom
 * an out-of-turn write names, and when an armed fault fires. The driver (model-driver.ts) runs them.
 */
import fc from 'fast-check';
import { GuardedWriteName, type DurabilityPolicy } from '../../cluster/contract';

export interface Shape {
  nodes: number;
  rf: number;
  durability: DurabilityPolicy;
}
export const shapes: Shape[] = [
  { nodes: 6, rf: 3, durability: { mode: 'majority_durable' } },
  { nodes: 7, rf: 5, durability: { mode: 'majority_durable' } },
  { nodes: 5, rf: 3, durability: { mode: 'replica_durable', n: 2 } },
  { nodes: 5, rf: 2, durability: { mode: 'replica_durable', n: 2 } },
  // W equal to the copies: every copy of the old set holds what it confirmed, so no removal has slack.
  { nodes: 5, rf: 3, durability: { mode: 'replica_durable', n: 3 } },
];
export const QUEUES = 3;
const STREAM = 's-0';
/**
 * Publish rates the generator picks from; the liveness bound needs the largest. A replica replicates up to
 * the tail of one tick ago, so at rate x tick above catchUpSlack (20 in fastConfig) nothing is ever admitted.
 */
export const RATES = [0, 5, 50, 150];

/** Whose node a fault hits, resolved against the partition's move in flight when it runs. */
export type Role = 'owner' | 'leaving' | 'joined' | 'follower' | 'any';
/** Whom an out-of-turn write names: a replica by its role, a down or suspended one, a free node, any id. */
export type Who = Role | 'learner' | 'suspended' | 'down' | 'free' | 'id';
const WHO: Who[] = ['owner', 'follower', 'leaving', 'learner', 'suspended', 'down', 'free', 'id'];
/**
 * When a fault fires: now, or armed on its partition until the move reaches a phase (T catching up, T admitted, R leaving,
 * a handoff closed admission), so that it lands between two steps of the move: the driver's next step on
 * that partition fires it instead of taking the step, and so does the next time step, before time passes.
 */
export type Phase = 'now' | 'learning' | 'admitted' | 'swapped' | 'closed';
type FaultKind =
  | 'crash-node'
  | 'restart-node'
  | 'lose-disk'
  | 'fail-owner'
  | 'stall-transfer'
  | 'laggards'
  | 'set-draining'
  | 'refuse-next-write'
  | 'events';

export type Cmd =
  /** `burst` steps back to back, no time between: a workflow issuing its next write at once. */
  | { t: 'step'; p: number; r: number; burst: number }
  | { t: 'random'; p: number; write: GuardedWriteName; node: Who; other: Who; gen: number; r: number }
  | { t: 'publish'; p: number; count: number }
  | { t: 'rate'; p: number; rate: number }
  | { t: 'advance'; ms: number }
  | { t: 'fault'; kind: FaultKind; role: Role; p: number; r: number; at: Phase };

export type FaultCmd = Extract<Cmd, { t: 'fault' }>;

const qIdx = fc.nat(QUEUES - 1);
/** Mostly queues: the stream only answers not_a_queue, so it gets one command in eight of those that name it. */
const anyIdx = fc.oneof({ weight: 7, arbitrary: qIdx }, { weight: 1, arbitrary: fc.constant(QUEUES) });

const PHASES: Phase[] = ['now', 'now', 'learning', 'admitted', 'admitted', 'swapped', 'swapped', 'closed'];

function faultArb(kinds: FaultKind[], roles: Role[], phases: Phase[] = PHASES): fc.Arbitrary<FaultCmd> {
  return fc.record({
    t: fc.constant('fault' as const),
    kind: fc.constantFrom(...kinds),
    role: fc.constantFrom(...roles),
    p: qIdx,
    r: fc.nat(999),
    at: fc.constantFrom(...phases),
  });
}

const cmd: fc.Arbitrary<Cmd> = fc.oneof(
  { weight: 10, arbitrary: fc.record({ t: fc.constant('step' as const), p: qIdx, r: fc.nat(999), burst: fc.constantFrom(1, 1, 2, 3) }) },
  // Out-of-turn writes naming the replicas of the move in flight: what a buggy or racing caller sends.
  {
    weight: 4,
    arbitrary: fc.record({
      t: fc.constant('random' as const),
      p: anyIdx,
      write: fc.constantFrom(...GuardedWriteName.options),
      node: fc.constantFrom(...WHO),
      other: fc.constantFrom(...WHO),
      gen: fc.constantFrom(0, 0, 0, 0, -1, 1),
      r: fc.nat(999),
    }),
  },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('publish' as const), p: anyIdx, count: fc.integer({ min: 1, max: 300 }) }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('rate' as const), p: anyIdx, rate: fc.constantFrom(...RATES) }) },
  // Mostly a few ticks, so that faults land between the steps of a move; sometimes long enough to finish one.
  {
    weight: 7,
    arbitrary: fc.record({
      t: fc.constant('advance' as const),
      ms: fc.oneof({ weight: 4, arbitrary: fc.integer({ min: 1, max: 400 }) }, { weight: 1, arbitrary: fc.integer({ min: 400, max: 3_000 }) }),
    }),
  },
  { weight: 2, arbitrary: faultArb(['crash-node', 'restart-node'], ['owner', 'leaving', 'joined', 'joined', 'follower', 'any']) },
  { weight: 1, arbitrary: faultArb(['crash-node', 'restart-node'], ['leaving', 'joined', 'follower'], ['now']) },
  { weight: 1, arbitrary: faultArb(['lose-disk'], ['owner', 'leaving', 'joined', 'joined', 'follower', 'any']) },
  // A stalled T behind R at the swap is what makes the boundary matter: most stalls hit T once it is admitted.
  { weight: 1, arbitrary: faultArb(['stall-transfer'], ['joined', 'joined', 'joined', 'follower', 'leaving'], ['learning', 'admitted', 'admitted', 'swapped', 'now']) },
  // Only a write quorum keeps up: every message confirmed from here is on exactly W copies, the pigeonhole's edge.
  { weight: 1, arbitrary: faultArb(['laggards'], ['any'], ['now', 'learning', 'admitted', 'admitted', 'swapped']) },
  { weight: 1, arbitrary: faultArb(['fail-owner', 'set-draining', 'refuse-next-write', 'events'], ['any']) },
);

export interface Scenario {
  shape: Shape;
  seed: number;
  cmds: Cmd[];
  /** When settling, keep this many (0 or 1) down nodes down for good: a lost machine, within the fault budget. */
  lostForGood: number;
  ownersFail: boolean;
}

/** 40-150 commands: long enough to finish several moves per partition and to break them in between. */
export function scenarioArb(minLength = 40, maxLength = 150): fc.Arbitrary<Scenario> {
  return fc.record({
    shape: fc.constantFrom(...shapes),
    seed: fc.nat(),
    cmds: fc.array(cmd, { minLength, maxLength, size: 'max' }),
    lostForGood: fc.nat(1),
    ownersFail: fc.boolean(),
  });
}

export const pid = (i: number) => (i >= QUEUES ? STREAM : `q-${i}`);
