/**
 * Typed HTTP client for the broker contract. Every reply is parsed with the contract's schema, so a broker
 * that answers off-contract fails loudly here instead of deep inside a workflow. A typed refusal is a value
 * (WriteRefused), not an exception: callers decide what each refusal means for them.
 */
import type { z } from 'zod';
import {
  BadRequest,
  ClockState,
  Controls,
  CreatePartitionRequest,
  DeleteReply,
  EventsPage,
  FaultReply,
  GuardedWrites,
  InvariantsReport,
  Node,
  NodesView,
  PartitionView,
  Progress,
  PublishReply,
  SetDrainingRequest,
  SyncBudget,
  Topology,
  TopologyChanges,
  TopologyPage,
  WriteReply,
  type Fault,
  type GuardedWriteName,
  type GuardedWriteRequest,
} from './contract';
import { conformingChanges, conformingNodes, conformingPage, conformingTopology } from './conforming';

export class ClusterHttpError extends Error {
  constructor(
    readonly status: number,
    readonly method: string,
    readonly path: string,
    readonly body: unknown,
  ) {
    const parsed = BadRequest.safeParse(body);
    super(
      `${method} ${path} answered ${status}: ${parsed.success ? parsed.data.message : JSON.stringify(body).slice(0, 300)}`,
    );
    this.name = 'ClusterHttpError';
  }
}

export interface ClusterClientOptions {
  token?: string;
  /** Per request, wall milliseconds. */
  timeoutMs?: number;
}

export class ClusterClient {
  readonly baseUrl: string;
  constructor(
    baseUrl: string,
    private readonly options: ClusterClientOptions = {},
  ) {
    this.baseUrl = baseUrl.replace(/\/+$/, '');
  }

  /** The authorization header, for a caller that sends its own plain requests. */
  authHeaders(): Record<string, string> {
    return this.options.token ? { authorization: `Bearer ${this.options.token}` } : {};
  }

  private async request<S extends z.ZodType>(
    schema: S,
    method: 'GET' | 'POST' | 'PUT' | 'DELETE',
    path: string,
    body?: unknown,
    okStatuses: number[] = [200],
    timeoutMs = this.options.timeoutMs ?? 30_000,
    /** A check by hand that accepts what the schema would return unchanged (cluster/conforming.ts); zod judges the rest. */
    fast?: (json: unknown) => z.infer<S> | null,
  ): Promise<z.infer<S>> {
    const headers = this.authHeaders();
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res = await fetch(this.baseUrl + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await res.text();
    let json: unknown;
    try {
      json = text === '' ? undefined : JSON.parse(text);
    } catch {
      json = text;
    }
    if (!okStatuses.includes(res.status)) throw new ClusterHttpError(res.status, method, path, json);
    return fast?.(json) ?? schema.parse(json);
  }

  health(): Promise<unknown> {
    return fetch(this.baseUrl + '/healthz', { signal: AbortSignal.timeout(5_000) }).then((r) => {
      if (!r.ok) throw new ClusterHttpError(r.status, 'GET', '/healthz', null);
      return r.json();
    });
  }

  topology(): Promise<Topology> {
    return this.request(Topology, 'GET', '/v1/topology', undefined, [200], undefined, conformingTopology);
  }

  /** One page of the topology: the records after `after` in id order (see contract.ts); 404 from a broker without it. */
  topologyPage(after: string | null, limit: number): Promise<TopologyPage> {
    const query = `limit=${limit}${after === null ? '' : `&after=${encodeURIComponent(after)}`}`;
    return this.request(TopologyPage, 'GET', `/v1/topology/page?${query}`, undefined, [200], undefined, conformingPage);
  }

  /** What changed after generation `after`, or null when the broker cannot say (410): read the whole topology. */
  async topologyChanges(after: number): Promise<TopologyChanges | null> {
    try {
      return await this.request(TopologyChanges, 'GET', `/v1/topology/changes?after=${after}`, undefined, [200], undefined, conformingChanges);
    } catch (err) {
      if (err instanceof ClusterHttpError && err.status === 410) return null;
      throw err;
    }
  }

  nodes(): Promise<NodesView> {
    return this.request(NodesView, 'GET', '/v1/nodes', undefined, [200], undefined, conformingNodes);
  }

  partition(id: string): Promise<PartitionView> {
    return this.request(PartitionView, 'GET', `/v1/partitions/${encodeURIComponent(id)}`);
  }

  progress(id: string): Promise<Progress> {
    return this.request(Progress, 'GET', `/v1/partitions/${encodeURIComponent(id)}/progress`);
  }

  syncBudget(): Promise<SyncBudget> {
    return this.request(SyncBudget, 'GET', '/v1/sync-budget');
  }

  /** Marks a node as draining or clears the mark (the same flag again changes nothing); answers the node. */
  setDraining(node: string, draining: boolean, reason?: string): Promise<Node> {
    const body: SetDrainingRequest = reason === undefined ? { draining } : { draining, reason };
    return this.request(Node, 'PUT', `/v1/nodes/${encodeURIComponent(node)}/draining`, SetDrainingRequest.parse(body));
  }

  /** A guarded write: 200 with the new record, or 409 with a typed refusal. */
  write<N extends GuardedWriteName>(partition: string, write: N, request: GuardedWriteRequest<N>): Promise<WriteReply> {
    GuardedWrites[write].parse(request);
    return this.request(WriteReply, 'POST', `/v1/partitions/${encodeURIComponent(partition)}/${write}`, request, [
      200, 409,
    ]);
  }

  events(after: number, options: { limit?: number; waitMs?: number } = {}): Promise<EventsPage> {
    const q = new URLSearchParams({ after: String(after) });
    if (options.limit !== undefined) q.set('limit', String(options.limit));
    if (options.waitMs !== undefined) q.set('waitMs', String(options.waitMs));
    return this.request(EventsPage, 'GET', `/v1/events?${q}`, undefined, [200], (options.waitMs ?? 0) + 30_000);
  }

  invariants(): Promise<InvariantsReport> {
    return this.request(InvariantsReport, 'GET', '/v1/invariants');
  }

  /** The test controls the broker offers, or null when it offers none (404, as a production broker answers). */
  async controls(): Promise<Controls | null> {
    try {
      return await this.request(Controls, 'GET', '/v1/controls');
    } catch (err) {
      if (err instanceof ClusterHttpError && err.status === 404) return null;
      throw err;
    }
  }

  clock(): Promise<z.infer<typeof ClockState>> {
    return this.request(ClockState, 'GET', '/v1/clock');
  }

  /** Stepped clock only: advance simulated time. */
  advance(ms: number): Promise<z.infer<typeof ClockState>> {
    return this.request(ClockState, 'POST', '/v1/clock/advance', { ms });
  }

  publish(partition: string, count: number): Promise<z.infer<typeof PublishReply>> {
    return this.request(PublishReply, 'POST', `/v1/partitions/${encodeURIComponent(partition)}/publish`, { count });
  }

  setRate(partition: string, publishRate: number): Promise<PartitionView> {
    return this.request(PartitionView, 'POST', `/v1/partitions/${encodeURIComponent(partition)}/rate`, {
      publishRate,
    });
  }

  joinNode(id: string, capacity = 1, zone = 'z1'): Promise<Node> {
    return this.request(Node, 'POST', '/v1/nodes', { id, capacity, zone });
  }

  createPartition(request: z.input<typeof CreatePartitionRequest>): Promise<PartitionView> {
    return this.request(PartitionView, 'POST', '/v1/partitions', request);
  }

  deletePartition(id: string): Promise<z.infer<typeof DeleteReply>> {
    return this.request(DeleteReply, 'DELETE', `/v1/partitions/${encodeURIComponent(id)}`);
  }

  deleteNode(id: string): Promise<z.infer<typeof DeleteReply>> {
    return this.request(DeleteReply, 'DELETE', `/v1/nodes/${encodeURIComponent(id)}`);
  }

  fault(fault: Fault): Promise<z.infer<typeof FaultReply>> {
    return this.request(FaultReply, 'POST', '/v1/faults', fault);
  }
}
