/**
 * The random schedules of random-schedules.test.ts: a seeded generator of operations and the faults injected
 * between their steps, the bound each operation must end within (derived from its bytes), and the coverage a run
 * prints and checks.
 */
import type { GuardedWriteName } from '../../cluster/contract';

export type Kind = 'follower-move' | 'owner-handoff' | 'owner-move' | 'grow' | 'replace';
export const KINDS: Kind[] = ['follower-move', 'owner-handoff', 'owner-move', 'grow', 'replace'];

/**
 * The nodes of one schedule by role: the owner, the follower that leaves or hands over (R: a follower move's R, a
 * handoff's D, an owner move's via, a replacement's lost L, a second follower for an increase), the other follower
 * F and the target T (none for a handoff).
 */
export type Role = 'owner' | 'R' | 'F' | 'T';

export type FaultKind = 'crash-node' | 'lose-disk' | 'fail-owner' | 'refuse-write' | 'lost-reply' | 'cancel' | 'worker-restart' | 'temporal-restart';
export const FAULT_KINDS: FaultKind[] = ['crash-node', 'lose-disk', 'fail-owner', 'refuse-write', 'lost-reply', 'cancel', 'worker-restart', 'temporal-restart'];

/** Just before or just after a guarded write the worker sends, or a time after the start. */
export type Trigger = { write: GuardedWriteName; when: 'before' | 'after' } | { afterMs: number };

export interface PlannedFault {
  kind: FaultKind;
  trigger: Trigger;
  /** The node a crash or disk loss hits. */
  role?: Role;
  /** A crashed node restarts this long after the crash. */
  healMs: number;
}

export interface Schedule {
  index: number;
  partition: string;
  kind: Kind;
  /** Owner first. */
  replicas: [string, string, string];
  /** Candidates for T in the order to try them (a start refused for zones tries the next). */
  targets: string[];
  faults: PlannedFault[];
}

/** The guarded writes each kind sends, in order. */
export const WRITES: Record<Kind, GuardedWriteName[]> = {
  'follower-move': ['add-learner', 'swap', 'remove-leaving'],
  replace: ['add-learner', 'swap', 'remove-leaving'],
  grow: ['add-learner', 'promote-learner'],
  'owner-handoff': ['close-admission', 'commit-owner', 'reopen-admission'],
  'owner-move': ['add-learner', 'swap', 'remove-leaving', 'close-admission', 'commit-owner', 'reopen-admission'],
};

/** mulberry32: a small seeded generator, so a seed names one run's schedules. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** One Temporal restart in every this many schedules: each costs the dev server's stop and start. */
export const SCHEDULES_PER_TEMPORAL_RESTART = 25;

/**
 * `count` schedules on partitions q-<first + i>. Schedule i runs kind i mod 5 and its first fault is fault kind
 * i mod 7 (the Temporal restart aside), so every kind and fault kind is planned once every 35 schedules at most
 * (and each at least once in any 7 or 5 in a row); the rest is drawn. One schedule in every 25 also restarts
 * Temporal, at its first write, with nothing timed beside it that could end the operation first.
 */
export function generate(seed: number, count: number, nodes: string[], first: number): Schedule[] {
  const rand = prng(seed);
  const int = (n: number) => Math.floor(rand() * n);
  const pick = <T>(xs: T[]): T => xs[int(xs.length)]!;
  const shuffle = <T>(xs: T[]): T[] => {
    const out = [...xs];
    for (let i = out.length - 1; i > 0; i--) {
      const j = int(i + 1);
      [out[i], out[j]] = [out[j]!, out[i]!];
    }
    return out;
  };
  const restartAt = int(Math.min(count, SCHEDULES_PER_TEMPORAL_RESTART));
  const drawn: FaultKind[] = FAULT_KINDS.filter((k) => k !== 'temporal-restart');
  return Array.from({ length: count }, (_, index) => {
    const kind = KINDS[index % KINDS.length]!;
    const order = shuffle(nodes);
    const replicas = order.slice(0, 3) as [string, string, string];
    const writes = WRITES[kind];
    const temporalRestart = index % SCHEDULES_PER_TEMPORAL_RESTART === restartAt;
    const faults: PlannedFault[] = [];
    const usedWrites = new Set<string>();
    const hit = new Set<Role>();
    const kinds = [drawn[index % drawn.length]!, ...Array.from({ length: int(3) }, () => pick(drawn))];
    for (const k of kinds) {
      const fault = draw(k);
      if (fault && !(temporalRestart && 'afterMs' in fault.trigger)) faults.push(fault);
    }
    if (temporalRestart) faults.push({ kind: 'temporal-restart', trigger: { write: writes[0]!, when: 'before' }, healMs: 0 });
    return { index, partition: `q-${first + index}`, kind, replicas, targets: order.slice(3), faults };

    function draw(k: FaultKind): PlannedFault | null {
      const healMs = 1_000 + int(2_000);
      const free = writes.filter((w) => !usedWrites.has(w));
      // A refusal comes before its write, a lost reply after it; process faults and node faults either way.
      const when = k === 'refuse-write' ? 'before' : k === 'lost-reply' ? 'after' : pick(['before', 'after'] as const);
      const timed = (k === 'cancel' || k === 'crash-node' || k === 'fail-owner') && rand() < 0.4;
      let trigger: Trigger;
      if (timed || free.length === 0) {
        if (k === 'refuse-write' || k === 'lost-reply') return null;
        trigger = { afterMs: 100 + int(1_500) };
      } else {
        const write = pick(free);
        usedWrites.add(write);
        trigger = { write, when };
      }
      if (k === 'worker-restart' && faults.some((f) => f.kind === 'worker-restart')) return null;
      if (k !== 'crash-node' && k !== 'lose-disk') return { kind: k, trigger, healMs };
      // One node fault per role, and one disk loss per schedule: at most W - 1 = 1 copy of a partition of three
      // may lose its disk. A replacement's L is down already, so only T may lose its disk there: the owner's or
      // F's could hold confirmed messages whose only other copy is on L.
      const roles: Role[] = kind === 'owner-handoff' ? ['owner', 'R', 'F'] : kind === 'replace' ? ['owner', 'F', 'T'] : ['owner', 'R', 'F', 'T'];
      const open = roles.filter((r) => !hit.has(r) && (k === 'crash-node' || kind !== 'replace' || r === 'T'));
      if (open.length === 0 || (k === 'lose-disk' && faults.some((f) => f.kind === 'lose-disk'))) return null;
      const role = pick(open);
      hit.add(role);
      return { kind: k, trigger, role, healMs };
    }
  });
}

export function describeSchedule(s: Schedule): string {
  const at = (t: Trigger) => ('afterMs' in t ? `${t.afterMs} ms in` : `${t.when} ${t.write}`);
  const faults = s.faults.map((f) => `${f.kind}${f.role ? ` of ${f.role}` : ''} ${at(f.trigger)}`).join(', ');
  return `#${s.index} ${s.kind} on ${s.partition} [${s.replicas.join(', ')}]: ${faults}`;
}

/** The reference cluster's tuning that bounds how long a schedule may take. */
export interface Rates {
  transferBytesPerSec: number;
  perNodeLimit: number;
  recoveryDelayMs: number;
}

/**
 * Fixed cost of one operation on a loaded 2-core machine: workflow and activity tasks, the 500 ms polls, a
 * handoff's wait of up to 1 s for a quiet point.
 */
const BASE_MS = 30_000;
/** A slot's transfer rate is the worst case; the factor covers a slower machine. */
const TRANSFER_FACTOR = 4;
/** A refused write or lost reply waits out the activity's retry, which backs off to 10 s; a node fault also the recovery. */
const RETRY_MS = 15_000;
/** A worker's shutdown lets its running activities finish (each at most 10 s) before the new worker polls. */
const WORKER_RESTART_MS = 30_000;
/** The dev server's stop, its start on its database (tens of seconds under load) and the worker's reconnect. */
const TEMPORAL_RESTART_MS = 90_000;

/**
 * How long a schedule's operation may take: the fixed cost, every copy it makes (one of the partition's log, one
 * more when a disk is lost) at one transfer slot's share of a node's rate, and each fault's recovery.
 */
export function boundMs(s: Schedule, logBytes: number, rates: Rates): number {
  const slotRate = rates.transferBytesPerSec / rates.perNodeLimit;
  const copies = (s.kind === 'owner-handoff' ? 0 : 1) + s.faults.filter((f) => f.kind === 'lose-disk').length;
  const faults = s.faults.reduce((sum, f) => {
    if (f.kind === 'worker-restart') return sum + WORKER_RESTART_MS;
    if (f.kind === 'temporal-restart') return sum + TEMPORAL_RESTART_MS;
    return sum + f.healMs + rates.recoveryDelayMs + RETRY_MS;
  }, 0);
  return Math.round(BASE_MS + (TRANSFER_FACTOR * 1000 * copies * logBytes) / slotRate + faults);
}

/** What a run covered: printed at the end, and the floors are checked on it. */
export interface Coverage {
  schedules: number;
  byKind: Record<string, number>;
  planned: Record<string, number>;
  fired: Record<string, number>;
  /** Faults whose boundary the operation never reached, or whose time came after it ended. */
  unreached: Record<string, number>;
  outcomes: Record<string, number>;
  /** The largest share of its bound a schedule used. */
  worstBoundUse: number;
}

export function emptyCoverage(): Coverage {
  return { schedules: 0, byKind: {}, planned: {}, fired: {}, unreached: {}, outcomes: {}, worstBoundUse: 0 };
}

export function bump(counts: Record<string, number>, key: string): void {
  counts[key] = (counts[key] ?? 0) + 1;
}
