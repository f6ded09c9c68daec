/**
 * What the conformance cases share: picking a partition and nodes that fit from whatever topology the
 * implementation has right now (so the whole suite can run against one long-lived cluster), guarded writes
 * that fill in the generation and a fresh idempotency key, refusal checks that prove nothing changed, and
 * stepping the clock until something happens.
 */
import { randomBytes } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { ClusterClient } from '../client';
import {
  GuardedWrites,
  type ClusterEvent,
  type GuardedWriteName,
  type GuardedWriteRequest,
  type Partition,
  type RefusalCode,
  type WriteAccepted,
  type WriteRefused,
  type WriteReply,
} from '../contract';

export class CheckFailed extends Error {
  override name = 'CheckFailed';
}

/** Thrown by a case whose scenario this implementation's topology cannot host (reported, not failed). */
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

/** A queue partition with nothing in flight: the starting point of every move scenario. */
export function isQuiet(p: Partition, liveNodes: Set<string>): boolean {
  return (
    p.kind === 'queue' &&
    p.pendingRecovery === null &&
    p.learners.length === 0 &&
    p.leaving === null &&
    p.admission === 'open' &&
    p.followers.length >= 1 &&
    p.history.every((h) => !h.suspended) &&
    replicasOf(p).every((n) => liveNodes.has(n))
  );
}

type GuardFree<N extends GuardedWriteName> = Omit<GuardedWriteRequest<N>, 'expectedGeneration' | 'idempotencyKey'>;

export interface RawReply {
  status: number;
  json: unknown;
  text: string;
}

export class Harness {
  private keySeq = 0;
  private nodeSeq = 0;
  /** Per harness, so two cases of one run never reuse an idempotency key. */
  private readonly keyNonce = randomBytes(4).toString('hex');
  /** Partitions a case already claimed, so two scenarios in one case never pick the same one. */
  private readonly claimed = new Set<string>();

  constructor(
    readonly client: ClusterClient,
    /** Lower-case letters and digits: used in idempotency keys and in the ids of nodes this run joins. */
    readonly runId: string,
  ) {}

  key(label: string): string {
    this.keySeq += 1;
    return `conformance-${this.runId}-${this.keyNonce}-${label}-${this.keySeq}`;
  }

  async record(id: string): Promise<Partition> {
    return (await this.client.partition(id)).partition;
  }

  /** Quiet queue partitions not yet claimed by this case, fewest assigned copies first. */
  async quietQueues(count: number, options: { minFollowers?: number } = {}): Promise<Partition[]> {
    const topo = await this.client.topology();
    const live = new Set(topo.nodes.filter((n) => n.live).map((n) => n.id));
    const found = topo.partitions.filter(
      (p) => !this.claimed.has(p.id) && isQuiet(p, live) && p.followers.length >= (options.minFollowers ?? 1),
    );
    if (found.length < count) {
      throw new Skip(
        `needs ${count} queue partition(s) with nothing in flight and >= ${options.minFollowers ?? 1} follower(s), found ${found.length}`,
      );
    }
    const picked = found.slice(0, count);
    for (const p of picked) this.claimed.add(p.id);
    return picked;
  }

  async quietQueue(options: { minFollowers?: number } = {}): Promise<Partition> {
    const [p] = await this.quietQueues(1, options);
    if (p === undefined) throw new Skip('no quiet queue partition');
    return p;
  }

  async stream(): Promise<Partition> {
    const topo = await this.client.topology();
    const s = topo.partitions.find((p) => p.kind === 'stream');
    if (s === undefined) throw new Skip('needs a stream partition');
    return s;
  }

  /**
   * A live, non-draining node that holds no assigned copy of any partition and runs no transfer, so a
   * case can use it as a move target and crash it without touching anything else. Joins one if none fits.
   */
  async spareNode(exclude: string[] = []): Promise<string> {
    const [topo, budget] = await Promise.all([this.client.topology(), this.client.syncBudget()]);
    const busy = new Set(exclude);
    for (const p of topo.partitions) {
      for (const n of replicasOf(p)) busy.add(n);
      for (const h of p.history) busy.add(h.node);
    }
    for (const t of budget.transfers) busy.add(t.node);
    const spare = topo.nodes.find((n) => n.live && !n.draining && !busy.has(n.id));
    if (spare !== undefined) return spare.id;
    for (;;) {
      this.nodeSeq += 1;
      const id = `conf-${this.runId}-n${this.nodeSeq}`;
      if (topo.nodes.some((n) => n.id === id)) continue;
      return (await this.client.joinNode(id)).id;
    }
  }

  /** A guarded write against the partition's current generation with a fresh idempotency key. */
  async write<N extends GuardedWriteName>(
    partition: string,
    write: N,
    body: GuardFree<N>,
    guard: { expectedGeneration?: number; idempotencyKey?: string } = {},
  ): Promise<WriteReply> {
    const expectedGeneration = guard.expectedGeneration ?? (await this.record(partition)).generation;
    const request = {
      ...body,
      expectedGeneration,
      idempotencyKey: guard.idempotencyKey ?? this.key(write),
    } as GuardedWriteRequest<N>;
    return this.client.write(partition, write, request);
  }

  async accept<N extends GuardedWriteName>(partition: string, write: N, body: GuardFree<N>): Promise<WriteAccepted> {
    const reply = await this.write(partition, write, body);
    if (!reply.ok) {
      throw new CheckFailed(
        `${write} on ${partition} ${show(body)} was refused ${reply.refusal.code}: ${reply.refusal.message} saw ${show(reply.refusal.saw)}`,
      );
    }
    checkEqual(reply.write, write, `${write} reply names its write`);
    checkEqual(reply.partition.id, partition, `${write} reply names its partition`);
    return reply;
  }

  /**
   * The write must be refused with `code`, and the partition record (generation included) must be exactly
   * what it was before: a refusal changes nothing.
   */
  async refuse<N extends GuardedWriteName>(
    partition: string,
    write: N,
    body: GuardFree<N>,
    code: RefusalCode,
    guard: { expectedGeneration?: number } = {},
  ): Promise<WriteRefused> {
    const before = await this.record(partition);
    const reply = await this.write(partition, write, body, {
      expectedGeneration: guard.expectedGeneration ?? before.generation,
    });
    const after = await this.record(partition);
    if (reply.ok) {
      throw new CheckFailed(`${write} on ${partition} ${show(body)} was accepted, expected refusal ${code}`);
    }
    checkEqual(reply.write, write, `${write} refusal names its write`);
    check(
      reply.refusal.code === code,
      `${write} on ${partition} ${show(body)}: expected refusal ${code}, got ${reply.refusal.code} (${reply.refusal.message})`,
    );
    check(reply.refusal.message.length > 0, `${write} refusal ${code} carries a message`);
    check(typeof reply.refusal.saw === 'object', `${write} refusal ${code} carries what it saw`);
    checkEqual(after.generation, before.generation, `generation after refused ${write} (${code})`);
    checkEqual(after, before, `partition record after refused ${write} (${code})`);
    return reply;
  }

  /** Step the clock until `done` holds; fails after `maxMs` simulated milliseconds. */
  async advanceUntil(what: string, done: () => Promise<boolean>, options: { stepMs?: number; maxMs?: number } = {}) {
    const stepMs = options.stepMs ?? 100;
    const maxMs = options.maxMs ?? 300_000;
    for (let waited = 0; ; waited += stepMs) {
      if (await done()) return;
      if (waited >= maxMs) throw new CheckFailed(`${what}: still not true after ${maxMs} simulated ms`);
      await this.client.advance(stepMs);
    }
  }

  /** The current end of the event feed. */
  async cursor(): Promise<number> {
    let after = 0;
    for (;;) {
      const page = await this.client.events(after, { limit: 10_000 });
      if (page.events.length === 0) return Math.max(after, page.cursor);
      after = page.cursor;
    }
  }

  /** Events after `after`, all pages. */
  async eventsSince(after: number): Promise<ClusterEvent[]> {
    const out: ClusterEvent[] = [];
    let cursor = after;
    for (;;) {
      const page = await this.client.events(cursor, { limit: 10_000 });
      if (page.events.length === 0) return out;
      out.push(...page.events);
      cursor = page.cursor;
    }
  }

  /** Step the clock until an event matching `match` appears after `after`; returns it. */
  async advanceUntilEvent(
    what: string,
    after: number,
    match: (e: ClusterEvent) => boolean,
    options: { stepMs?: number; maxMs?: number } = {},
  ): Promise<ClusterEvent> {
    let cursor = after;
    let found: ClusterEvent | undefined;
    await this.advanceUntil(
      what,
      async () => {
        for (;;) {
          const page = await this.client.events(cursor, { limit: 10_000 });
          found = page.events.find(match);
          if (found !== undefined) return true;
          if (page.events.length === 0) return false;
          cursor = page.cursor;
        }
      },
      options,
    );
    if (found === undefined) throw new CheckFailed(`${what}: no matching event`);
    return found;
  }

  async breachCount(): Promise<number> {
    return (await this.client.invariants()).breaches.length;
  }

  /** A plain HTTP request, for the replies the typed client treats as errors (404, 400, 422). */
  async raw(
    method: 'GET' | 'POST',
    path: string,
    body?: string,
    contentType: string | null = 'application/json',
  ): Promise<RawReply> {
    const headers: Record<string, string> = {};
    if (body !== undefined && contentType !== null) headers['content-type'] = contentType;
    const res = await fetch(this.client.baseUrl + path, {
      method,
      headers,
      body,
      signal: AbortSignal.timeout(30_000),
    });
    const text = await res.text();
    let json: unknown;
    try {
      json = text === '' ? undefined : JSON.parse(text);
    } catch {
      json = undefined;
    }
    return { status: res.status, json, text };
  }
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
