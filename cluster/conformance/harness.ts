/**
 * What the conformance cases share: the partitions and nodes a case works on, all created by the suite for
 * itself through the test controls (ids `conf-<runId>-...`), guarded writes that fill in the generation and a
 * fresh idempotency key, refusal checks that prove nothing changed, waiting until something happens (stepping a
 * stepped clock, polling with backoff under a wall clock), and the cleanup that runs after every case and
 * deletes what the case created, so the broker's topology is left exactly as the case found it.
 */
import { randomBytes } from 'node:crypto';
import { ClusterClient } from '../client';
import {
  type ClusterEvent,
  type ControlName,
  type Controls,
  type Fault,
  type GuardedWriteName,
  type GuardedWriteRequest,
  type Node,
  type Partition,
  type PartitionView,
  type RefusalCode,
  type Topology,
  type WriteAccepted,
  type WriteRefused,
  type WriteReply,
} from '../contract';
import { CheckFailed, Skip, check, checkEqual, replicasOf, show, type GuardFree } from './checks';
import { settledRecord, type SettledRecord } from '../model';

/** Every partition and node the conformance suite creates starts with this; anything else is not its own. */
export const SUITE_PREFIX = 'conf-';
/** Copies of each partition the suite creates, and the messages its log starts with (a quick catch-up). */
export const SUITE_REPLICATION = 3;
export const SUITE_INITIAL_MESSAGES = 10_000;

export interface RawReply {
  status: number;
  json: unknown;
  text: string;
}

/** What one run of the suite knows about the broker, shared by every case of the run. */
export interface SuiteContext {
  client: ClusterClient;
  /** Lower-case letters and digits: in idempotency keys and in the ids of what this run creates. */
  runId: string;
  /** null: the broker offers no test control (a production broker). */
  controls: Controls | null;
  /** Counters for the ids this run creates, so no two cases pick the same one. */
  created: { nodes: number; partitions: number };
  /** Only the contract's reads: nothing is created or written. */
  readOnly: boolean;
}

export function offers(ctx: SuiteContext, control: ControlName): boolean {
  return ctx.controls?.offered.includes(control) ?? false;
}

/** The record without what time alone changes: retained copies that expired by `now`, measured sizes and rates. */
function settledView(view: PartitionView): SettledRecord {
  const now = view.progress.now;
  return settledRecord({ ...view.partition, retainedCopies: view.partition.retainedCopies.filter((c) => c.retainedUntil > now) });
}

/** Guarded writes a wall-clock broker may refuse because it moved on between our read and our write. */
const WALL_ATTEMPTS = 5;

export class Harness {
  private keySeq = 0;
  /** Per harness, so two cases of one run never reuse an idempotency key. */
  private readonly keyNonce = randomBytes(4).toString('hex');
  /** Partitions this case works on: never picked twice in one case, settled by cleanup(). */
  private readonly claimed = new Set<string>();
  /** Nodes this case took as spares or for an isolated partition: never placed on again in this case. */
  private readonly reserved = new Set<string>();
  /** What this case created, deleted by cleanup(): partitions first, then the nodes they were on. */
  private readonly created: { partitions: string[]; nodes: string[] } = { partitions: [], nodes: [] };
  /** Undo actions of the faults this case injected, run by cleanup() in reverse order. */
  private readonly undo: (() => Promise<void>)[] = [];

  readonly client: ClusterClient;
  readonly runId: string;
  readonly controls: Controls | null;
  /** A broker without test controls runs on wall time. */
  readonly clock: 'wall' | 'stepped';

  constructor(private readonly ctx: SuiteContext) {
    this.client = ctx.client;
    this.runId = ctx.runId;
    this.controls = ctx.controls;
    this.clock = ctx.controls?.clock ?? 'wall';
  }

  offers(control: ControlName): boolean {
    return offers(this.ctx, control);
  }

  /** This run may create partitions and nodes of its own: only where it can delete them again. */
  mayCreate(): boolean {
    const controls: ControlName[] = ['create-partition', 'join-node', 'delete-partition', 'delete-node'];
    return !this.ctx.readOnly && controls.every((c) => this.offers(c));
  }

  key(label: string): string {
    this.keySeq += 1;
    return `conformance-${this.runId}-${this.keyNonce}-${label}-${this.keySeq}`;
  }

  async record(id: string): Promise<Partition> {
    return (await this.client.partition(id)).partition;
  }

  /** The record as far as writes decide it, to check that something changed nothing. */
  async settledRecord(id: string): Promise<SettledRecord> {
    return settledView(await this.client.partition(id));
  }

  /** The broker's own time (wall or stepped milliseconds), from a contract read. */
  async now(): Promise<number> {
    return (await this.client.nodes()).now;
  }

  /** A partition or node this case created (and will delete): the only ones it works on. */
  private mine(id: string): boolean {
    return this.created.partitions.includes(id) || this.created.nodes.includes(id);
  }

  /**
   * `count` new quiet queue partitions of this case (every case deletes what it created, so there is nothing of
   * an earlier case to reuse). `isolated` places them on nodes that hold nothing else, for a case that crashes
   * one of its nodes.
   */
  async quietQueues(count: number, options: { minFollowers?: number; isolated?: boolean } = {}): Promise<Partition[]> {
    const minFollowers = options.minFollowers ?? 1;
    const picked: Partition[] = [];
    while (picked.length < count) {
      picked.push(await this.createPartition('queue', Math.max(SUITE_REPLICATION, minFollowers + 1), options.isolated));
    }
    for (const p of picked) this.claimed.add(p.id);
    return picked;
  }

  async quietQueue(options: { minFollowers?: number; isolated?: boolean } = {}): Promise<Partition> {
    const [p] = await this.quietQueues(1, options);
    if (p === undefined) throw new CheckFailed('quietQueues(1) returned nothing');
    return p;
  }

  /** A stream partition of this run. */
  async stream(): Promise<Partition> {
    const topo = await this.client.topology();
    const s = topo.partitions.find((p) => p.kind === 'stream' && this.mine(p.id));
    const p = s ?? (await this.createPartition('stream', SUITE_REPLICATION, false));
    this.claimed.add(p.id);
    return p;
  }

  private requireCreate(): void {
    if (!this.mayCreate()) {
      throw new Skip('needs partitions and nodes of its own, which this run may not create (read-only, or no create-partition/join-node control)');
    }
  }

  private requireControl(control: ControlName): void {
    if (!this.offers(control)) throw new Skip(`needs the test control ${control}, which this broker does not offer`);
  }

  private async createPartition(kind: 'queue' | 'stream', copies: number, isolated = false): Promise<Partition> {
    this.requireCreate();
    const topo = await this.client.topology();
    const replicas = isolated ? await this.spareNodes(copies, topo) : await this.placement(copies, topo);
    if (isolated) for (const n of replicas) this.reserved.add(n);
    for (;;) {
      this.ctx.created.partitions += 1;
      const id = `${SUITE_PREFIX}${this.runId}-${kind === 'queue' ? 'q' : 's'}${this.ctx.created.partitions}`;
      if (topo.partitions.some((p) => p.id === id)) continue;
      const view = await this.client.createPartition({ id, kind, replicas, initialMessages: SUITE_INITIAL_MESSAGES });
      this.created.partitions.push(id);
      return view.partition;
    }
  }

  /** Nodes of this run for a new partition: ones that already hold copies first, so spare nodes stay spare. */
  private async placement(count: number, topo: Topology): Promise<string[]> {
    const copies = new Map<string, number>();
    for (const p of topo.partitions) for (const n of replicasOf(p)) copies.set(n, (copies.get(n) ?? 0) + 1);
    const usable = topo.nodes
      .filter((n) => this.mine(n.id) && n.live && !n.draining && !this.reserved.has(n.id) && copies.has(n.id))
      .sort((a, b) => (copies.get(a.id) ?? 0) - (copies.get(b.id) ?? 0))
      .map((n) => n.id)
      .slice(0, count);
    if (usable.length < count) usable.push(...(await this.spareNodes(count - usable.length, topo)));
    return usable;
  }

  /**
   * `count` live, non-draining nodes of this run that hold no copy, no eligible-set entry and no transfer
   * of any partition, joined when too few exist: a case can use them as move targets and crash them without
   * touching anything else.
   */
  private async spareNodes(count: number, topo: Topology, exclude: string[] = []): Promise<string[]> {
    const budget = await this.client.syncBudget();
    const busy = new Set([...exclude, ...this.reserved]);
    for (const p of topo.partitions) {
      for (const n of replicasOf(p)) busy.add(n);
      for (const h of p.history) busy.add(h.node);
    }
    for (const t of budget.transfers) busy.add(t.node);
    const out = topo.nodes.filter((n) => this.mine(n.id) && n.live && !n.draining && !busy.has(n.id)).map((n) => n.id);
    while (out.length < count) {
      this.requireCreate();
      this.ctx.created.nodes += 1;
      const id = `${SUITE_PREFIX}${this.runId}-n${this.ctx.created.nodes}`;
      if (topo.nodes.some((n) => n.id === id)) continue;
      out.push((await this.client.joinNode(id)).id);
      this.created.nodes.push(id);
    }
    return out.slice(0, count);
  }

  /** Deletes a partition this case created, before its cleanup would. */
  async deletePartition(id: string): Promise<void> {
    if (!this.created.partitions.includes(id)) throw new CheckFailed(`${id} is not a partition this case created`);
    await this.client.deletePartition(id);
    this.created.partitions.splice(this.created.partitions.indexOf(id), 1);
    this.claimed.delete(id);
  }

  /** One spare node (see spareNodes), reserved for this case. */
  async spareNode(exclude: string[] = []): Promise<string> {
    const [id] = await this.spareNodes(1, await this.client.topology(), exclude);
    if (id === undefined) throw new CheckFailed('spareNodes(1) returned nothing');
    this.reserved.add(id);
    return id;
  }

  /** Inject a fault (a test control); cleanup() undoes what can be undone. */
  async fault(f: Fault): Promise<void> {
    this.requireControl('faults');
    await this.client.fault(f);
    if (f.fault === 'crash-node') {
      this.undo.push(async () => {
        const node = (await this.client.nodes()).nodes.find((n) => n.id === f.node);
        if (node !== undefined && !node.live) await this.client.fault({ fault: 'restart-node', node: f.node });
      });
    } else if (f.fault === 'stall-transfer' && f.stalled) {
      this.undo.push(async () => {
        await this.client.fault({ ...f, stalled: false });
      });
    } else if (f.fault === 'set-draining' && f.draining) {
      this.undo.push(async () => {
        await this.client.fault({ ...f, draining: false });
      });
    }
  }

  /** Mark a node draining through the contract (or clear the mark); cleanup() clears a mark this case set. */
  async setDraining(node: string, draining: boolean, reason?: string): Promise<Node> {
    const reply = await this.client.setDraining(node, draining, reason);
    if (draining) this.undo.push(async () => void (await this.client.setDraining(node, false)));
    return reply;
  }

  async publish(partition: string, count: number): Promise<{ firstOffset: number; nextOffset: number }> {
    this.requireControl('publish');
    return this.client.publish(partition, count);
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
    for (let attempt = 1; ; attempt++) {
      const reply = await this.write(partition, write, body);
      if (!reply.ok) {
        // Under a wall clock the broker bumps generations on its own (an admission): read again and retry.
        if (reply.refusal.code === 'generation_mismatch' && this.clock === 'wall' && attempt < WALL_ATTEMPTS) continue;
        throw new CheckFailed(
          `${write} on ${partition} ${show(body)} was refused ${reply.refusal.code}: ${reply.refusal.message} saw ${show(reply.refusal.saw)}`,
        );
      }
      checkEqual(reply.write, write, `${write} reply names its write`);
      checkEqual(reply.partition.id, partition, `${write} reply names its partition`);
      return reply;
    }
  }

  /**
   * The write must be refused with `code`, and the partition record (generation included) must be exactly
   * what it was before: a refusal changes nothing. Under a wall clock, an attempt during which the broker
   * bumped the generation on its own proves nothing either way and is made again.
   */
  async refuse<N extends GuardedWriteName>(
    partition: string,
    write: N,
    body: GuardFree<N>,
    code: RefusalCode,
    guard: { expectedGeneration?: number } = {},
  ): Promise<WriteRefused> {
    for (let attempt = 1; ; attempt++) {
      const before = await this.client.partition(partition);
      const reply = await this.write(partition, write, body, {
        expectedGeneration: guard.expectedGeneration ?? before.partition.generation,
      });
      const after = await this.client.partition(partition);
      if (reply.ok) {
        throw new CheckFailed(`${write} on ${partition} ${show(body)} was accepted, expected refusal ${code}`);
      }
      const moved = after.partition.generation !== before.partition.generation;
      if (moved && this.clock === 'wall' && attempt < WALL_ATTEMPTS) continue;
      checkEqual(reply.write, write, `${write} refusal names its write`);
      check(
        reply.refusal.code === code,
        `${write} on ${partition} ${show(body)}: expected refusal ${code}, got ${reply.refusal.code} (${reply.refusal.message})`,
      );
      check(reply.refusal.message.length > 0, `${write} refusal ${code} carries a message`);
      check(typeof reply.refusal.saw === 'object', `${write} refusal ${code} carries what it saw`);
      checkEqual(after.partition.generation, before.partition.generation, `generation after refused ${write} (${code})`);
      checkEqual(settledView(after), settledView(before), `partition record after refused ${write} (${code})`);
      return reply;
    }
  }

  /**
   * Wait until `done` holds: a stepped clock is advanced `stepMs` at a time, up to `maxMs` simulated ms; under
   * a wall clock `done` is polled with backoff for up to `maxMs` wall ms.
   */
  async advanceUntil(what: string, done: () => Promise<boolean>, options: { stepMs?: number; maxMs?: number } = {}) {
    const maxMs = options.maxMs ?? 300_000;
    if (this.clock === 'stepped') {
      const stepMs = options.stepMs ?? 100;
      for (let waited = 0; ; waited += stepMs) {
        if (await done()) return;
        if (waited >= maxMs) throw new CheckFailed(`${what}: still not true after ${maxMs} simulated ms`);
        await this.client.advance(stepMs);
      }
    }
    const deadline = Date.now() + maxMs;
    for (let pause = 10; ; pause = Math.min(pause * 2, 500)) {
      if (await done()) return;
      if (Date.now() >= deadline) throw new CheckFailed(`${what}: still not true after ${maxMs} wall ms`);
      await new Promise((resolve) => setTimeout(resolve, pause));
    }
  }

  /** Let `ms` of the broker's time pass: advance a stepped clock, or wait for a wall one. */
  async elapse(ms: number): Promise<void> {
    if (this.clock === 'stepped') {
      await this.client.advance(ms);
      return;
    }
    const until = (await this.now()) + ms;
    await this.advanceUntil(`${ms} ms of broker time`, async () => (await this.now()) >= until, { maxMs: ms + 60_000 });
  }

  /**
   * After every case, whatever it did: undo its faults, bring each partition it worked on back to quiet
   * (recovery activated, admission open, learners dropped, a started move finished, restarted replicas
   * rejoined: the broker lets a case get out of whatever it did), then delete every partition and node the case
   * created, even when settling failed, so the next case (or the operator) finds nothing of this one.
   */
  async cleanup(): Promise<void> {
    try {
      for (const undo of this.undo.splice(0).reverse()) await undo();
      for (const id of this.claimed) await this.settle(id);
    } finally {
      for (const id of this.created.partitions.splice(0).reverse()) await this.client.deletePartition(id);
      for (const id of this.created.nodes.splice(0).reverse()) await this.client.deleteNode(id);
    }
  }

  private async settle(id: string): Promise<void> {
    await this.advanceUntil(`cleanup: ${id} has no pending recovery`, async () => (await this.record(id)).pendingRecovery === null, {
      maxMs: 120_000,
    });
    const p = await this.record(id);
    if (p.kind !== 'queue') return;
    if (p.admission === 'closed') await this.accept(id, 'reopen-admission', {});
    for (const l of p.learners) await this.accept(id, 'drop-learner', { node: l });
    if (p.leaving !== null && p.boundary !== null) {
      const { joined, offset } = p.boundary;
      await this.advanceUntil(`cleanup: ${joined} covers the boundary of ${id}`, async () => {
        const progress = await this.client.progress(id);
        return (progress.replicas.find((r) => r.node === joined)?.durableOffset ?? -1) >= offset;
      }, { maxMs: 120_000 });
      await this.accept(id, 'remove-leaving', { node: p.leaving });
    }
    await this.advanceUntil(`cleanup: every replica of ${id} rejoined`, async () => {
      const r = await this.record(id);
      return r.history.every((h) => !h.suspended);
    }, { maxMs: 120_000 });
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

  /** Wait (as advanceUntil does) until an event matching `match` appears after `after`; returns it. */
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

  /** A plain HTTP request, for the replies the typed client treats as errors (404, 400, 422). */
  async raw(
    method: 'GET' | 'POST' | 'PUT',
    path: string,
    body?: string,
    contentType: string | null = 'application/json',
  ): Promise<RawReply> {
    const headers = this.client.authHeaders();
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
