/**
 * The reference cluster's HTTP face (fastify): validates every input with the contract's schemas, maps the
 * routes onto the simulation, and persists each change in one store transaction before answering.
 */
import Fastify, { type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import pino, { type Logger } from 'pino';
import type { z } from 'zod';
import {
  AdvanceRequest,
  ControlName,
  CreatePartitionRequest,
  EventsQuery,
  TopologyChangesQuery,
  TopologyPageQuery,
  Fault,
  GuardedWrites,
  JoinNodeRequest,
  PublishRequest,
  SetDrainingRequest,
  SetRateRequest,
  type BadRequest,
  type ClusterEvent,
  type GuardedWriteName,
} from './contract';
import { openApiDocument } from './openapi';
import { ClusterSim, NodeExistsError, UnknownNodeError, UnknownPartitionError } from './sim/sim';
import type { SimConfig } from './sim/types';
import { ClusterStore } from './store';

export interface ClusterOptions {
  /** 0 picks a free port. */
  port?: number;
  host?: string;
  /** Required for any host but loopback; checked on every request when set. */
  token?: string;
  /** Data directory; without one the database lives in memory. */
  data?: string;
  nodes?: number;
  partitions?: number;
  streams?: number;
  clock?: 'wall' | 'stepped';
  config?: Partial<SimConfig>;
  logger?: Logger;
  /**
   * Test-only, in-process: called right after each guarded write commits, before it is answered (a test's
   * entry script exits the process here to lose the reply).
   */
  afterCommit?: () => void;
}

export interface RunningCluster {
  url: string;
  sim: ClusterSim;
  resumed: boolean;
  close(): Promise<void>;
}

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '::1']);

class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly body: BadRequest,
  ) {
    super(body.message);
  }
}

function badRequest(where: string, error: z.ZodError): HttpError {
  const issues = error.issues.map((i) => ({
    path: i.path.length ? i.path.map(String).join('.') : where,
    message: i.message,
  }));
  const message = issues.map((i) => `${i.path}: ${i.message}`).join('; ');
  return new HttpError(400, { error: 'bad_request', message: `invalid ${where}: ${message}`, issues });
}

function parse<S extends z.ZodType>(schema: S, data: unknown, where: string): z.infer<S> {
  const r = schema.safeParse(data);
  if (!r.success) throw badRequest(where, r.error);
  return r.data;
}

function notFound(message: string): HttpError {
  return new HttpError(404, { error: 'not_found', message, issues: [] });
}

function canonical(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(canonical);
  if (v && typeof v === 'object') {
    return Object.fromEntries(
      Object.keys(v)
        .sort()
        .map((k) => [k, canonical((v as Record<string, unknown>)[k])]),
    );
  }
  return v;
}

export async function startCluster(options: ClusterOptions = {}): Promise<RunningCluster> {
  const host = options.host ?? '127.0.0.1';
  if (!LOOPBACK.has(host) && !options.token) {
    throw new Error(`listening on ${host} needs a bearer token (--token or CLUSTER_TOKEN)`);
  }
  const log = options.logger ?? pino({ level: 'silent' });
  const clock = options.clock ?? 'wall';
  const store = new ClusterStore(options.data);
  const snap = store.load();
  const resumed = snap !== null;
  const sim = snap
    ? ClusterSim.fromSnapshot(snap)
    : ClusterSim.create({
        nodes: options.nodes ?? 5,
        partitions: options.partitions ?? 12,
        streams: options.streams ?? 1,
        config: options.config ?? {},
      });
  if (!snap) store.persist(sim.takeChanges());

  let closing = false;
  const waiters = new Set<() => void>();
  const notify = () => {
    for (const w of waiters) w();
    waiters.clear();
  };
  const persist = () => {
    store.persist(sim.takeChanges());
    notify();
  };

  const app = httpApp(log, options.token);

  const partitionOf = (params: unknown): string => {
    const id = (params as { id: string }).id;
    if (!sim.hasPartition(id)) throw notFound(`unknown partition ${id}`);
    return id;
  };

  const served: Served = { sim, store, clock, persist, notify, waiters, closing: () => closing, partitionOf, afterCommit: options.afterCommit };
  readRoutes(app, served);
  controlRoutes(app, served);
  guardedWriteRoute(app, served);

  const timer = clock === 'wall' ? wallClock(sim, persist) : undefined;

  await app.listen({ port: options.port ?? 0, host });
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : options.port;
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;

  return {
    url,
    sim,
    resumed,
    async close() {
      closing = true;
      if (timer) clearInterval(timer);
      notify();
      await app.close();
      store.persist(sim.takeChanges());
      store.close();
    },
  };
}

/** Fastify with the contract's error bodies: any content type read as JSON, typed errors mapped, the token checked. */
function httpApp(log: Logger, token: string | undefined): FastifyInstance {
  // Requests are not logged: the cluster logs its own lifecycle and errors through `log`.
  const app = Fastify({
    logger: false,
    bodyLimit: 1024 * 1024,
    // Partition ids may be 128 characters; longer path segments are refused below with a BadRequest body.
    routerOptions: { maxParamLength: 256 },
    frameworkErrors: (err: FastifyError, _req: FastifyRequest, reply: FastifyReply) => {
      const status = err.statusCode && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 400;
      void reply.code(status).send({ error: 'bad_request', message: err.message, issues: [{ path: 'url', message: err.message }] });
    },
  });
  app.removeAllContentTypeParsers();
  // Any content type is read as JSON: a client that forgets the header gets validation, not a 415.
  app.addContentTypeParser('*', { parseAs: 'string' }, (_req, body, done) => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    if (text.trim() === '') return done(null, undefined);
    try {
      done(null, JSON.parse(text) as unknown);
    } catch (e) {
      done(new HttpError(400, { error: 'bad_request', message: `body: malformed JSON (${(e as Error).message})`, issues: [{ path: 'body', message: 'malformed JSON' }] }), undefined);
    }
  });

  app.setErrorHandler((err: unknown, _req: FastifyRequest, reply: FastifyReply) => {
    if (err instanceof HttpError) return reply.code(err.status).send(err.body);
    if (err instanceof UnknownPartitionError) return reply.code(404).send({ error: 'not_found', message: err.message, issues: [] });
    if (err instanceof UnknownNodeError) return reply.code(404).send({ error: 'not_found', message: err.message, issues: [] });
    const status = (err as { statusCode?: number }).statusCode;
    const message = (err as Error).message ?? String(err);
    if (status && status >= 400 && status < 500) {
      return reply.code(status).send({ error: 'bad_request', message, issues: [] });
    }
    log.error({ err }, 'internal error');
    return reply.code(500).send({ error: 'internal', message });
  });
  app.setNotFoundHandler((req, reply) =>
    reply.code(404).send({ error: 'not_found', message: `no route ${req.method} ${req.url}`, issues: [] }),
  );

  if (token) {
    const expected = `Bearer ${token}`;
    app.addHook('onRequest', async (req, reply) => {
      if (req.headers.authorization !== expected) {
        return reply.code(401).send({ error: 'unauthorized', message: 'a bearer token is required', issues: [] });
      }
    });
  }

  return app;
}

/** What the routes share: the simulation, its store, and how a change reaches the disk and the feed's waiters. */
interface Served {
  sim: ClusterSim;
  store: ClusterStore;
  clock: 'wall' | 'stepped';
  /** Persist the simulation's changes and wake the waiting event reads. */
  persist: () => void;
  /** Wake the waiting event reads. */
  notify: () => void;
  waiters: Set<() => void>;
  closing: () => boolean;
  /** The partition id of a route's params; 404 when the cluster has no such partition. */
  partitionOf: (params: unknown) => string;
  afterCommit: (() => void) | undefined;
}

/** Reads: health, the OpenAPI document, topology, nodes, budget, invariants, clock, partitions and the event feed. */
function readRoutes(app: FastifyInstance, { sim, store, clock, waiters, closing, partitionOf }: Served): void {
  app.get('/healthz', async () => ({ ok: true, now: sim.now, clock }));
  const openapi = openApiDocument();
  app.get('/openapi.json', async () => openapi);
  app.get('/v1/topology', async () => sim.topology());
  app.get('/v1/topology/page', async (req) => {
    const { after, limit } = parse(TopologyPageQuery, req.query, 'query');
    return sim.topologyPage(after, limit ?? 1_000);
  });
  app.get('/v1/topology/changes', async (req, reply) => {
    const { after } = parse(TopologyChangesQuery, req.query, 'query');
    const changes = sim.changesSince(after);
    if (changes !== null) return changes;
    const gone: BadRequest = {
      error: 'gone',
      message: `this broker cannot list the changes after generation ${after} (it is at ${sim.generation}, and answers changes from the generation it started at): read GET /v1/topology`,
      issues: [],
    };
    return reply.code(410).send(gone);
  });
  app.get('/v1/nodes', async () => sim.nodesView());
  app.get('/v1/sync-budget', async () => sim.syncBudget());
  app.get('/v1/invariants', async () => sim.invariants());
  app.get('/v1/clock', async () => ({ mode: clock, now: sim.now }));
  app.get('/v1/partitions/:id', async (req) => sim.partitionView(partitionOf(req.params)));
  app.get('/v1/partitions/:id/progress', async (req) => sim.progress(partitionOf(req.params)));

  app.get('/v1/events', async (req) => {
    const q = parse(EventsQuery, req.query, 'query');
    const read = (): ClusterEvent[] => store.readEvents(q.after, q.limit, sim.now);
    let events = read();
    const deadline = Date.now() + q.waitMs;
    while (events.length === 0 && Date.now() < deadline && !closing()) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          waiters.delete(done);
          resolve();
        }, deadline - Date.now());
        const done = () => {
          clearTimeout(timer);
          resolve();
        };
        waiters.add(done);
      });
      events = read();
    }
    return { events, cursor: events.length ? events[events.length - 1]!.seq : q.after };
  });

}

/** The test controls: the stepped clock, publishing and rates, nodes joining and draining, faults, creation and deletion. */
function controlRoutes(app: FastifyInstance, { sim, store, clock, persist, notify, partitionOf }: Served): void {
  app.post('/v1/clock/advance', async (req, reply) => {
    const body = parse(AdvanceRequest, req.body, 'body');
    if (clock !== 'stepped') {
      return reply.code(409).send({ error: 'conflict', message: 'the clock runs on wall time; start with --clock stepped to advance it', issues: [] });
    }
    sim.advance(body.ms);
    persist();
    return { mode: clock, now: sim.now };
  });

  app.post('/v1/partitions/:id/publish', async (req) => {
    const body = parse(PublishRequest, req.body, 'body');
    const r = sim.publish(partitionOf(req.params), body.count);
    persist();
    return r;
  });

  app.post('/v1/partitions/:id/rate', async (req) => {
    const body = parse(SetRateRequest, req.body, 'body');
    const view = sim.setRate(partitionOf(req.params), body.publishRate);
    persist();
    return view;
  });

  app.post('/v1/nodes', async (req, reply) => {
    const body = parse(JoinNodeRequest, req.body ?? {}, 'body');
    try {
      const node = sim.joinNode(body.id, body.capacity, body.zone);
      persist();
      return node;
    } catch (e) {
      if (e instanceof NodeExistsError) {
        return reply.code(409).send({ error: 'conflict', message: e.message, issues: [] });
      }
      throw e;
    }
  });

  app.put('/v1/nodes/:id/draining', async (req) => {
    const body = parse(SetDrainingRequest, req.body, 'body');
    const node = sim.setDraining((req.params as { id: string }).id, body.draining, body.reason ?? null);
    persist();
    return node;
  });

  app.post('/v1/faults', async (req) => {
    const f = parse(Fault, req.body, 'body');
    const detail = sim.fault(f);
    persist();
    return { ok: true, fault: f.fault, detail };
  });

  // Test controls discovery: a production broker answers 404 here, and the conformance suite skips what it lacks.
  const controls = { clock, offered: ControlName.options.filter((c) => c !== 'advance-clock' || clock === 'stepped') };
  app.get('/v1/controls', async () => controls);

  app.post('/v1/partitions', async (req, reply) => {
    const body = parse(CreatePartitionRequest, req.body, 'body');
    if (sim.hasPartition(body.id)) {
      return reply.code(409).send({ error: 'conflict', message: `partition ${body.id} already exists`, issues: [{ path: 'id', message: 'already exists' }] });
    }
    const live = new Map(sim.nodesView().nodes.map((n) => [n.id, n.live]));
    const unfit = body.replicas.filter((n) => live.get(n) !== true);
    if (unfit.length > 0) {
      const message = `replicas must be live registered nodes; not: ${unfit.join(', ')}`;
      return reply.code(400).send({ error: 'bad_request', message, issues: [{ path: 'replicas', message }] });
    }
    const { initialMessages, publishRate, messageBytes } = body;
    const view = sim.createPartition(body.id, body.kind, body.replicas, { initialMessages, publishRate, messageBytes });
    persist();
    return view;
  });

  app.delete('/v1/partitions/:id', async (req) => {
    const id = partitionOf(req.params);
    sim.deletePartition(id);
    store.delete('partition', id, sim.takeChanges());
    notify();
    return { deleted: 'partition', id };
  });

  app.delete('/v1/nodes/:id', async (req, reply) => {
    const { id } = req.params as { id: string };
    const uses = sim.nodeInUse(id);
    if (uses.length > 0) {
      const message = `node ${id} is still in use (${uses.join(', ')}); delete or move what it holds first`;
      return reply.code(409).send({ error: 'conflict', message, issues: [{ path: 'id', message: 'still in use' }] });
    }
    sim.deleteNode(id);
    store.delete('node', id, sim.takeChanges());
    notify();
    return { deleted: 'node', id };
  });
}

/** The guarded writes: one store transaction each, and a retried idempotency key gets the first reply. */
function guardedWriteRoute(app: FastifyInstance, { sim, store, notify, partitionOf, afterCommit }: Served): void {
  app.post('/v1/partitions/:id/:write', async (req, reply) => {
    const { write } = req.params as { id: string; write: string };
    if (!Object.hasOwn(GuardedWrites, write)) throw notFound(`no guarded write ${write}`);
    const name = write as GuardedWriteName;
    const body = parse(GuardedWrites[name], req.body, 'body');
    const id = partitionOf(req.params);
    const fingerprint = JSON.stringify([id, name, canonical(body)]);
    const stored = store.lookupReply(body.idempotencyKey);
    if (stored) {
      if (stored.fingerprint !== fingerprint) {
        return reply.code(422).send({
          error: 'conflict',
          message: `idempotency key ${body.idempotencyKey} was first used with a different request`,
          issues: [{ path: 'idempotencyKey', message: 'already used with a different request' }],
        });
      }
      return reply.code(stored.status).type('application/json').send(stored.body);
    }
    const result = sim.write(id, name, body);
    const status = result.ok ? 200 : 409;
    const text = JSON.stringify(result);
    store.persist(sim.takeChanges(), { key: body.idempotencyKey, fingerprint, status, body: text });
    afterCommit?.();
    notify();
    return reply.code(status).type('application/json').send(text);
  });
}

/** On wall time the simulation advances every tickMs by the time that really passed, carrying the fractions. */
function wallClock(sim: ClusterSim, persist: () => void): NodeJS.Timeout {
  let last = performance.now();
  let carried = 0;
  return setInterval(() => {
    const t = performance.now();
    carried += t - last;
    last = t;
    const ms = Math.floor(carried);
    if (ms <= 0) return;
    carried -= ms;
    sim.advance(ms);
    persist();
  }, sim.config.tickMs);
}
