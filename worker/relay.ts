/**
 * The progress relay: reads the broker's event feed from a durable cursor and turns events into signals to
 * the partition's workflow. Delivery is at least once (the cursor is saved only after the signals of a page
 * went out); workflows are idempotent about it (progress is a maximum). Progress is coalesced per partition
 * and throttled, except when a replica crosses the switch boundary, which is what a move waits for.
 */
import fs from 'node:fs';
import path from 'node:path';
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import type { SignalDefinition } from '@temporalio/workflow';
import type { Logger } from 'pino';
import type { ClusterClient } from '../cluster/client';
import type { ClusterEvent } from '../cluster/contract';
import {
  admittedSignal,
  nodeSignal,
  progressSignal,
  reconfigurationWorkflowId,
  recoverySignal,
  type ProgressSignal,
} from '../workflows/definitions';
import { SourceKey, TargetKey } from '../workflows/search-attributes';

export interface RelayOptions {
  cluster: Pick<ClusterClient, 'events' | 'baseUrl'>;
  client: Client;
  /** File that keeps the cursor across restarts. */
  cursorFile: string;
  logger: Logger;
  /** Long-poll wait per read of the feed. */
  pollWaitMs?: number;
  /** Least time between two progress signals to one partition, unless the boundary is crossed. */
  progressIntervalMs?: number;
  /** Pause between pages, so a page gathers a batch of events to coalesce. */
  batchMs?: number;
}

type ProgressEvent = Extract<ClusterEvent, { type: 'progress' }>;

interface Sent {
  at: number;
  covering: number;
}

/** How many replicas are durable at or beyond the switch boundary: a rise is what a move waits for. */
function covering(e: ProgressEvent): number {
  return e.boundary === null ? 0 : e.replicas.filter((r) => r.durableOffset >= e.boundary!).length;
}

export class ProgressRelay {
  private cursor = 0;
  private stopped = false;
  private loop: Promise<void> | null = null;
  private readonly sent = new Map<string, Sent>();
  /** Progress held back by the throttle, sent once its interval has passed. */
  private readonly held = new Map<string, ProgressEvent>();
  private readonly log: Logger;
  signalsSent = 0;

  constructor(private readonly options: RelayOptions) {
    this.log = options.logger.child({ component: 'relay' });
    try {
      const saved = JSON.parse(fs.readFileSync(options.cursorFile, 'utf8')) as { url?: string; cursor?: number };
      if (saved.url === options.cluster.baseUrl && typeof saved.cursor === 'number') this.cursor = saved.cursor;
    } catch {
      // No saved cursor yet: start from the beginning of the feed.
    }
  }

  get position(): number {
    return this.cursor;
  }

  start(): void {
    this.loop ??= this.run();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.loop;
  }

  private async run(): Promise<void> {
    this.log.info({ cursor: this.cursor, url: this.options.cluster.baseUrl }, 'progress relay started');
    let failures = 0;
    while (!this.stopped) {
      try {
        const page = await this.options.cluster.events(this.cursor, {
          waitMs: this.held.size > 0 ? 200 : (this.options.pollWaitMs ?? 5_000),
          limit: 2_000,
        });
        await this.deliver(page.events);
        this.cursor = page.cursor;
        this.save();
        failures = 0;
        if (page.events.length > 0) await sleep(this.options.batchMs ?? 250);
      } catch (err) {
        failures += 1;
        if (failures === 1 || failures % 20 === 0) {
          this.log.warn({ err: (err as Error).message, failures }, 'relay could not read or deliver events; retrying');
        }
        await sleep(Math.min(5_000, 200 * failures));
      }
    }
  }

  private save(): void {
    const tmp = `${this.options.cursorFile}.tmp`;
    fs.mkdirSync(path.dirname(this.options.cursorFile), { recursive: true });
    fs.writeFileSync(tmp, JSON.stringify({ url: this.options.cluster.baseUrl, cursor: this.cursor }));
    fs.renameSync(tmp, this.options.cursorFile);
  }

  /** Signal one workflow; one that does not run (no move, or it already ended) has nothing to be told. */
  private async signal<Args extends unknown[]>(workflowId: string, def: SignalDefinition<Args>, ...args: Args): Promise<void> {
    try {
      await this.options.client.workflow.getHandle(workflowId).signal(def, ...args);
      this.signalsSent += 1;
    } catch (err) {
      if (!(err instanceof WorkflowNotFoundError)) throw err;
    }
  }

  private async deliver(events: ClusterEvent[]): Promise<void> {
    const move = reconfigurationWorkflowId;
    const now = Date.now();
    for (const e of events) {
      if (e.type === 'progress') this.held.set(e.partition, e);
    }
    const sends: Promise<void>[] = [];
    for (const e of events) {
      switch (e.type) {
        case 'admitted':
          sends.push(this.signal(move(e.partition), admittedSignal, { node: e.node, generation: e.generation }));
          break;
        case 'recovery_opened':
          sends.push(this.signal(move(e.partition), recoverySignal, { state: 'opened', epoch: e.epoch }));
          break;
        case 'recovery_activated':
          sends.push(this.signal(move(e.partition), recoverySignal, { state: 'activated', epoch: e.epoch, owner: e.owner, generation: e.generation }));
          break;
        case 'node_down':
        case 'node_up':
          sends.push(this.signalNode(e.node, e.type === 'node_up'));
          break;
        default:
          break;
      }
    }
    for (const [partition, e] of this.held) {
      const last = this.sent.get(partition);
      const count = covering(e);
      const due = !last || now - last.at >= (this.options.progressIntervalMs ?? 5_000) || count > last.covering;
      if (!due) continue;
      this.held.delete(partition);
      this.sent.set(partition, { at: now, covering: count });
      const payload: ProgressSignal = {
        generation: e.generation,
        confirmedTail: e.confirmedTail,
        boundary: e.boundary,
        replicas: e.replicas,
      };
      sends.push(this.signal(move(partition), progressSignal, payload));
    }
    await Promise.all(sends);
  }

  /** Node events go to the moves whose source or target is that node, found through visibility. */
  private async signalNode(node: string, live: boolean): Promise<void> {
    const query = `ExecutionStatus = "Running" AND (${TargetKey.name} = "${node}" OR ${SourceKey.name} = "${node}")`;
    for await (const wf of this.options.client.workflow.list({ query })) {
      await this.signal(wf.workflowId, nodeSignal, { node, live });
    }
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
