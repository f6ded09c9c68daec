/**
 * The admin API (fastify, its own port): cluster status, nodes with their score vectors, moves, the plan, the
 * operator's actions, the audit log, the dashboard and /metrics. Routes are declared once in a table that both
 * registers them and generates the OpenAPI document, so the document lists exactly what is served.
 *
 * Safety: bound to 127.0.0.1 unless told otherwise; every mutating call needs the bearer token, and every call
 * does on another address. Mutating calls must be JSON from this origin (Origin and Sec-Fetch-Site checked, no
 * CORS): a cross-site page can neither send the token header nor a JSON body without a preflight we never allow.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { z } from 'zod';
import { ClusterHttpError } from '../cluster/client';
import type { SyncBudget, Topology } from '../cluster/contract';
import { LastAnswers, MoveRefused, type MoveInProgress } from '../operations/moves';
import { reconfigurationWorkflowId, type MoveStatus } from '../rules/definitions';
import type { AuditLog, AuditSource } from '../operations/audit';
import type { AdminDeps, OperatorRequest, Requester } from './deps';
import { HistoryStore, startSampler } from './history';
import { LatestAnswer } from './latest';
import { createMetrics } from './metrics';
import { openApiDocument, type RouteSpec } from './openapi';
import { loopUnderReplicated, unknownId } from '../operations/rebalancer';
import { byNodeId, withTransferBytes } from '../operations/scores';
import type { HoldAction } from '../rules/rebalancer-rules';
import { AuditQuery, DrainBody, HistoryQuery, HistoryReply, NodeDetailReply, MoveRequestBody, MovesQuery, NodeActionBody, NodeParams, NodesQuery, Operator, PartitionActionBody, PartitionParams, PlanParams, ReasonBody } from './schemas';

export interface AdminOptions {
  deps: AdminDeps;
  audit: AuditLog;
  /** Where the last hour's samples go while the server runs; absent: kept in memory for this run. */
  history?: HistoryStore;
  /** How often it samples (5 s unless said). */
  historyIntervalMs?: number;
  /** Required: mutating calls (and every call off loopback) must carry it as `Authorization: Bearer <token>`. */
  token: string;
  host?: string;
  /** 0 picks a free port. */
  port?: number;
  /** The Temporal Web UI, for links to each move's workflow. */
  temporalUiUrl: string;
  namespace: string;
}

export interface RunningAdmin {
  url: string;
  /** Every route served, as `GET /api/moves/:partition`: what the OpenAPI document must list. */
  routes: string[];
  close(): Promise<void>;
}

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '::1']);
/**
 * How long the moves page waits for a move's status query: past it the move shows its last answer, or as visibility
 * lists it. An idle worker answers in tens of ms; a busy one (1,000 moves in flight) in seconds, which a page waiting a
 * whole second for still did not get, while the dashboard's first render waited for it (1.9 s p50 at 1,000 in flight).
 */
export const PAGE_STATUS_MS = 300;
/** How long a page waits for the list of moves in progress before it takes the last one. */
const LIST_WAIT_MS = 250;
/** The oldest list of moves in progress a page takes without waiting, while lists come slower than LIST_WAIT_MS. */
const LIST_STALE_MS = 5_000;
const PUBLIC_DIR = path.resolve(import.meta.dirname, 'public');

const resolve = createRequire(import.meta.url).resolve;
/** The dashboard's files, and the charting library's straight from node_modules (no CDN, no build step). */
const STATIC: Record<string, string> = {
  '/': path.join(PUBLIC_DIR, 'index.html'),
  '/app.js': path.join(PUBLIC_DIR, 'app.js'),
  '/style.css': path.join(PUBLIC_DIR, 'style.css'),
  '/vendor/uPlot.esm.js': resolve('uplot/dist/uPlot.esm.js'),
  '/vendor/uPlot.min.css': resolve('uplot/dist/uPlot.min.css'),
};
const CONTENT_TYPES: Record<string, string> = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8' };

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly issues: { path: string; message: string }[] = [],
  ) {
    super(message);
  }
}

function parse<S extends z.ZodType>(schema: S, data: unknown, where: string): z.infer<S> {
  const r = schema.safeParse(data ?? {});
  if (r.success) return r.data;
  const issues = r.error.issues.map((i) => ({ path: i.path.length ? i.path.map(String).join('.') : where, message: i.message }));
  throw new ApiError(400, 'bad_request', `invalid ${where}: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`, issues);
}

function sameSecret(given: string, expected: string): boolean {
  const a = crypto.createHash('sha256').update(given).digest();
  const b = crypto.createHash('sha256').update(expected).digest();
  return crypto.timingSafeEqual(a, b);
}

/** Unknown names are bad input: refused with the name and what the broker has, before anything is asked. */
function checkNames(topology: Topology, partition: string | null, nodes: Record<string, string | undefined>): void {
  const partitionProblem = partition === null ? null : unknownId(topology, 'partition', partition);
  if (partitionProblem !== null) throw new ApiError(404, 'unknown_partition', partitionProblem, [{ path: 'partition', message: `unknown partition ${partition}` }]);
  for (const [field, node] of Object.entries(nodes)) {
    const problem = node === undefined ? null : unknownId(topology, 'node', node, field);
    if (problem !== null) throw new ApiError(404, 'unknown_node', problem, [{ path: field, message: `unknown node ${node}` }]);
  }
}

function nodesOf(body: MoveRequestBody): Record<string, string | undefined> {
  switch (body.kind) {
    case 'grow':
      return { to: body.to };
    case 'replace':
      return { lost: body.lost, with: body.with };
    case 'owner-move':
      return { from: body.from, to: body.to, via: body.via };
    default:
      return { from: body.from, to: body.to };
  }
}

/**
 * Fastify with the API's error bodies: JSON bodies only, typed errors mapped, cross-site writes refused and the token
 * required (for writes always, for reads off loopback); `served` collects every route as it is registered.
 */
function httpApp(token: string, loopback: boolean): { app: FastifyInstance; served: string[] } {
  const app = Fastify({ logger: false, bodyLimit: 64 * 1024 });
  const served: string[] = [];
  app.addHook('onRoute', (r) => {
    for (const method of [r.method].flat()) if (method !== 'HEAD') served.push(`${method} ${r.url}`);
  });
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    if (text.trim() === '') return done(null, undefined);
    try {
      done(null, JSON.parse(text) as unknown);
    } catch (e) {
      done(new ApiError(400, 'bad_request', `body: malformed JSON (${(e as Error).message})`, [{ path: 'body', message: 'malformed JSON' }]), undefined);
    }
  });
  app.addContentTypeParser('*', (_req, _payload, done) => done(new ApiError(415, 'unsupported_media_type', 'send the body as application/json'), undefined));

  app.setErrorHandler((err: unknown, _req: FastifyRequest, reply: FastifyReply) => {
    if (err instanceof ApiError) return reply.code(err.status).send({ error: err.code, message: err.message, issues: err.issues });
    if (err instanceof MoveRefused) return reply.code(409).send({ error: err.code, message: err.message, issues: [] });
    if (err instanceof ClusterHttpError) return reply.code(502).send({ error: 'broker_error', message: err.message, issues: [] });
    const status = (err as { statusCode?: number }).statusCode;
    const message = (err as Error).message ?? String(err);
    if (status && status >= 400 && status < 500) return reply.code(status).send({ error: 'bad_request', message, issues: [] });
    return reply.code(500).send({ error: 'internal', message, issues: [] });
  });
  app.setNotFoundHandler((req, reply) => reply.code(404).send({ error: 'not_found', message: `no route ${req.method} ${req.url}`, issues: [] }));

  const authorized = (req: FastifyRequest): boolean => {
    const header = req.headers.authorization ?? '';
    return header.startsWith('Bearer ') && sameSecret(header.slice('Bearer '.length), token);
  };
  app.addHook('onRequest', async (req, reply) => {
    const mutating = req.method !== 'GET' && req.method !== 'HEAD';
    if (mutating) {
      const site = req.headers['sec-fetch-site'];
      const origin = req.headers.origin;
      if ((site !== undefined && site !== 'same-origin' && site !== 'none') || (origin !== undefined && origin !== `http://${req.headers.host}`)) {
        return reply.code(403).send({ error: 'cross_origin', message: `cross-site request refused (Origin ${origin ?? '-'}, Sec-Fetch-Site ${site ?? '-'})`, issues: [] });
      }
    }
    const isStatic = req.method === 'GET' && STATIC[req.url.split('?')[0]!] !== undefined;
    if ((mutating || (!loopback && !isStatic)) && !authorized(req)) {
      return reply.code(401).send({ error: 'unauthorized', message: 'a bearer token is required: Authorization: Bearer <ADMIN_TOKEN>', issues: [] });
    }
  });
  return { app, served };
}

export async function startAdmin(options: AdminOptions): Promise<RunningAdmin> {
  const { deps, audit } = options;
  const history = options.history ?? new HistoryStore(null);
  const host = options.host ?? '127.0.0.1';
  const loopback = LOOPBACK.has(host);
  if (!options.token) throw new Error('the admin API needs a bearer token (ADMIN_TOKEN)');
  const metrics = createMetrics();
  const ui = options.temporalUiUrl.replace(/\/+$/, '');
  // What the CLI checks before it shows a reply as its own broker's (client/views.ts).
  const source = { ...deps.source, namespace: options.namespace };
  const workflowLink = (workflowId: string) => `${ui}/namespaces/${encodeURIComponent(options.namespace)}/workflows/${encodeURIComponent(workflowId)}`;

  /**
   * Moves in progress are listed once a second at most, however many dashboards and scrapers ask, and a page waits at
   * most LIST_WAIT_MS for a list: past it, it takes the last one. With 1,000 moves in progress a list took 1-2.4 s on
   * two cores, which every page waited for; visibility's list is a few seconds behind the workflows either way. While
   * lists take longer than that, a page takes a list younger than LIST_STALE_MS at once (a dashboard polling every 2 s
   * keeps one that young), and waits again once a move is started or cancelled here.
   */
  const listed = new LatestAnswer(() => deps.moves(), LIST_WAIT_MS, { freshForMs: 1_000, lastAtOnceWithinMs: LIST_STALE_MS });
  /** Each listed move's last status answer: a page shows it for a move whose query is late. */
  const answers = new LastAnswers();
  const moves = async (): Promise<MoveInProgress[]> => (await listed.get()).value;
  /** The scores with the moves in progress counted, their bytes as the broker's transfers say. */
  const scores = (topology: Topology, running: readonly MoveInProgress[], budget: SyncBudget) => deps.scores(topology, withTransferBytes(running, budget.transfers));
  const historyIntervalMs = options.historyIntervalMs ?? 5_000;
  const sampler = startSampler({ deps, store: history, intervalMs: historyIntervalMs });
  const withProgress = (running: MoveStatus[]) =>
    sampler.progress(running).map((m) => {
      const workflowId = reconfigurationWorkflowId(m.partition);
      return { ...m, workflowId, link: workflowLink(workflowId) };
    });

  const { app, served } = httpApp(options.token, loopback);

  /** Runs one operator action, recording it with its outcome whatever the outcome. */
  const act = async <T>(req: FastifyRequest, action: string, target: string | null, params: Record<string, unknown>, reason: string, run: (by: Requester) => Promise<T>): Promise<T> => {
    const source: AuditSource = req.headers['x-admin-source'] === 'dashboard' ? 'dashboard' : 'api';
    const named = req.headers['x-operator'];
    const actor = named === undefined ? source : parse(Operator, named, 'header X-Operator');
    const record = (outcome: string) => audit.record({ actor, source, action, target, params, reason, outcome });
    try {
      const result = await run({ actor, reason });
      record('ok');
      return result;
    } catch (err) {
      if (err instanceof MoveRefused) metrics.refusal(err.code);
      record(err instanceof MoveRefused ? `refused (${err.code}): ${err.message}` : `error: ${(err as Error).message}`);
      throw err;
    }
  };

  /**
   * Pin, unpin, exclude, include: the loop's update, audited. Only a pin or an exclusion checks the id against the
   * broker, so a hold on an id the broker no longer has can still be lifted.
   */
  const holdRoute = (action: HoldAction, summary: string): RouteSpec => {
    const partitions = action === 'pin' || action === 'unpin';
    return {
      method: 'POST', url: `/api/${action}`, body: partitions ? PartitionActionBody : NodeActionBody, summary,
      handler: async (req) => {
        const body = partitions ? parse(PartitionActionBody, req.body, 'body') : parse(NodeActionBody, req.body, 'body');
        const id = 'partition' in body ? body.partition : body.node;
        if (action === 'pin') checkNames(await deps.topology(), id, {});
        if (action === 'exclude') checkNames(await deps.topology(), null, { node: id });
        return act(req, action, id, {}, body.reason, (by) => deps.rebalancer.hold(action, id, by));
      },
    };
  };

  const routes: RouteSpec[] = [
    {
      method: 'GET', url: '/api/status', summary: 'Rebalancer running or paused (by whom, why), pending recoveries, under-replicated partitions and their repairs, counts',
      handler: async () => {
        const [topology, rebalancer, running] = await Promise.all([deps.topology(), deps.rebalancer.status(), moves()]);
        const recoveryPending = topology.partitions
          .filter((p) => p.pendingRecovery)
          .map((p) => ({ partition: p.id, failedOwner: p.pendingRecovery!.failedOwner, epoch: p.pendingRecovery!.epoch, reason: p.pendingRecovery!.reason }));
        return {
          rebalancer,
          recoveryPending,
          underReplicated: deps.underReplicated(topology, running),
          repairsRunning: running.filter((m) => m.kind === 'replace').length,
          nodes: { total: topology.nodes.length, live: topology.nodes.filter((n) => n.live).length, draining: topology.nodes.filter((n) => n.draining).length },
          partitions: topology.partitions.length,
          movesRunning: running.length,
          temporalUiUrl: ui,
          source,
        };
      },
    },
    {
      method: 'GET', url: '/api/rebalancer', summary: "The loop's status as its query answers (what `rebalancer status --json` prints) with the under-replicated partitions; 404 when no loop runs",
      handler: async () => {
        const [loop, topology] = await Promise.all([deps.rebalancer.loop(), deps.topology()]);
        if (!loop) throw new ApiError(404, 'no_rebalancer', 'no rebalancer runs for this broker and task queue: `npm start` starts it');
        return { ...loop, underReplicated: loopUnderReplicated(topology, loop), source };
      },
    },
    {
      method: 'GET', url: '/api/nodes', query: NodesQuery, summary: 'Nodes with their score vectors, the cluster mean and both thresholds (paged)',
      handler: async (req) => {
        const q = parse(NodesQuery, req.query, 'query');
        const [topology, running, budget] = await Promise.all([deps.topology(), moves(), deps.syncBudget()]);
        const view = scores(topology, running, budget);
        const needle = q.filter?.toLowerCase();
        const chosen = view.nodes.filter((n) => !needle || n.node.toLowerCase().includes(needle) || n.zone.toLowerCase().includes(needle));
        chosen.sort(q.sort === 'id' ? byNodeId : (a, b) => b.total - a.total);
        return {
          total: chosen.length,
          offset: q.offset,
          limit: q.limit,
          mean: view.mean,
          upper: view.upper,
          lower: view.lower,
          spread: view.spread,
          weights: view.weights,
          maxTotal: Math.max(view.upper, ...view.nodes.map((n) => n.total)),
          nodes: chosen.slice(q.offset, q.offset + q.limit),
          source,
        };
      },
    },
    {
      method: 'GET', url: '/api/nodes/:node', params: NodeParams, query: HistoryQuery, response: NodeDetailReply, summary: "A node: its score, partitions, moves in and out (running and ended) and its score over the history's minutes",
      handler: async (req) => {
        const { node } = parse(NodeParams, req.params, 'path');
        const { minutes } = parse(HistoryQuery, req.query, 'query');
        const [topology, running, budget] = await Promise.all([deps.topology(), moves(), deps.syncBudget()]);
        checkNames(topology, null, { node });
        const view = scores(topology, running, budget);
        const { answered: mine } = await deps.statuses(running.filter((m) => m.from === node || m.to === node));
        const since = Date.now() - minutes * 60_000;
        const roleOf = (p: Topology['partitions'][number]) =>
          p.owner === node ? 'owner' : p.followers.includes(node) ? 'follower' : p.learners.includes(node) ? 'learner' : p.leaving === node ? 'leaving' : null;
        return {
          score: view.nodes.find((n) => n.node === node)!,
          mean: view.mean,
          upper: view.upper,
          lower: view.lower,
          partitions: topology.partitions.flatMap((p) => {
            const role = roleOf(p);
            return role ? [{ partition: p.id, kind: p.kind, role }] : [];
          }),
          running: withProgress(mine),
          ended: history.ended(since, node),
          points: history.nodePoints(node, since),
        };
      },
    },
    {
      method: 'GET', url: '/api/history', query: HistoryQuery, response: HistoryReply, summary: "The last hour (or `minutes`) as sampled every few seconds: spread and each dimension's worst node against the band, bytes copied per second, moves running, ended moves, recoveries pending, pauses and resumes",
      handler: async (req) => {
        const { minutes } = parse(HistoryQuery, req.query, 'query');
        const since = Date.now() - minutes * 60_000;
        return {
          intervalMs: historyIntervalMs,
          since,
          lastError: sampler.lastError(),
          samples: history.samples(since),
          ended: history.ended(since),
          markers: audit.succeeded(['pause', 'resume'], new Date(since)).map(({ at, actor, source, action, reason }) => ({ at, actor, source, action, reason })),
        };
      },
    },
    {
      method: 'GET', url: '/api/moves', query: MovesQuery, summary: 'Moves in progress (paged; every kind: phase, bytes, blocking reason, Temporal UI link) and recent ones',
      handler: async (req) => {
        const q = parse(MovesQuery, req.query, 'query');
        const [running, recent] = await Promise.all([moves(), q.recent > 0 ? deps.recentMoves(q.recent) : Promise.resolve([])]);
        // Only the page's moves are asked for their status: one that ended since the list is left out of the page, and one
        // that has not answered within PAGE_STATUS_MS shows its last answer (`asOf`), or as visibility lists it (`late`),
        // so the page never waits on the slowest of a busy worker's workflows.
        const waitedMs = q.wait ?? PAGE_STATUS_MS;
        const page = await deps.statuses(running.slice(q.offset, q.offset + q.limit), waitedMs, answers.heard);
        const { known, unknown } = answers.late(running, page.late);
        return {
          source,
          waitedMs,
          total: running.length,
          offset: q.offset,
          limit: q.limit,
          running: withProgress([...page.answered, ...known.map(({ status, at }) => ({ ...status, asOf: new Date(at).toISOString() }))]),
          late: unknown.map((m) => ({ ...m, link: workflowLink(m.workflowId) })),
          recent: recent.map((m) => ({ ...m, link: workflowLink(m.workflowId) })),
        };
      },
    },
    {
      method: 'GET', url: '/api/moves/:partition', params: PartitionParams, summary: "A partition's latest reconfiguration, running or ended",
      handler: async (req) => {
        const { partition } = parse(PartitionParams, req.params, 'path');
        const detail = await deps.show(partition);
        return { ...detail, link: workflowLink(detail.workflowId) };
      },
    },
    {
      method: 'GET', url: '/api/plan', summary: 'Dry run: the moves the planner would make now and to convergence',
      handler: async () => {
        return deps.plan(await deps.topology());
      },
    },
    {
      method: 'GET', url: '/api/audit', query: AuditQuery, summary: 'Operator actions, newest first (who, when, what, reason, outcome)',
      handler: async (req) => {
        const q = parse(AuditQuery, req.query, 'query');
        return { entries: audit.list(q) };
      },
    },
    {
      method: 'POST', url: '/api/pause', body: ReasonBody, summary: 'Pause rebalancing cluster-wide (moves in flight finish)',
      handler: async (req) => {
        const { reason } = parse(ReasonBody, req.body, 'body');
        return act(req, 'pause', null, {}, reason, (by) => deps.rebalancer.pause(by));
      },
    },
    {
      method: 'POST', url: '/api/resume', body: ReasonBody, summary: 'Resume rebalancing',
      handler: async (req) => {
        const { reason } = parse(ReasonBody, req.body, 'body');
        return act(req, 'resume', null, {}, reason, (by) => deps.rebalancer.resume(by));
      },
    },
    holdRoute('pin', 'Pin a partition: the rebalancer proposes and starts nothing on it (operators\' moves and drains go ahead)'),
    holdRoute('unpin', 'Unpin a partition'),
    holdRoute('exclude', 'Exclude a node from rebalancing: no copy or ownership moves onto or off it by the rebalancer (a drain still runs)'),
    holdRoute('include', 'Include an excluded node in rebalancing again'),
    {
      method: 'POST', url: '/api/plan/:id/approve', params: PlanParams, body: ReasonBody, summary: "Propose mode: start exactly the pending plan's steps; stale ones are refused with why",
      handler: async (req) => {
        const { id } = parse(PlanParams, req.params, 'path');
        const { reason } = parse(ReasonBody, req.body, 'body');
        return act(req, 'approve', id, {}, reason, (by) => deps.rebalancer.approve(id, by));
      },
    },
    {
      method: 'POST', url: '/api/plan/refresh', body: ReasonBody, summary: 'Propose mode: supersede the pending plan with a fresh one',
      handler: async (req) => {
        const { reason } = parse(ReasonBody, req.body, 'body');
        return act(req, 'refresh plan', null, {}, reason, (by) => deps.rebalancer.refresh(by));
      },
    },
    {
      method: 'POST', url: '/api/moves', body: MoveRequestBody, summary: 'Request a follower move, owner handoff, owner move, replication-factor increase or replacement',
      handler: async (req, reply) => {
        const body = parse(MoveRequestBody, req.body, 'body');
        checkNames(await deps.topology(), body.partition, nodesOf(body));
        const { reason, ...request } = body;
        const started = await act(req, body.kind, body.partition, request, reason, (by) => deps.start(request as OperatorRequest, by));
        listed.forget();
        void reply.code(202);
        return { ...started, link: workflowLink(started.workflowId) };
      },
    },
    {
      method: 'POST', url: '/api/moves/:partition/cancel', params: PartitionParams, body: ReasonBody, summary: 'Cancel a move: accepted before the swap, refused after it with the reason',
      handler: async (req) => {
        const { partition } = parse(PartitionParams, req.params, 'path');
        const { reason } = parse(ReasonBody, req.body, 'body');
        checkNames(await deps.topology(), partition, {});
        const status = await act(req, 'cancel', partition, {}, reason, (by) => deps.cancel(partition, by));
        listed.forget();
        return status;
      },
    },
    {
      method: 'POST', url: '/api/drain', body: DrainBody, summary: 'Drain a node: hand off what it owns, move every copy off it (every queue copy, with queuesOnly)',
      handler: async (req, reply) => {
        const { node, queuesOnly, reason } = parse(DrainBody, req.body, 'body');
        checkNames(await deps.topology(), null, { node });
        const started = await act(req, 'drain', node, queuesOnly ? { queuesOnly } : {}, reason, (by) => deps.drain(node, by, { queuesOnly }));
        void reply.code(202);
        return { ...started, link: workflowLink(started.workflowId) };
      },
    },
    {
      method: 'POST', url: '/api/undrain', body: NodeActionBody, summary: "Stop a node's drain and clear its draining mark",
      handler: async (req) => {
        const { node, reason } = parse(NodeActionBody, req.body, 'body');
        checkNames(await deps.topology(), null, { node });
        await act(req, 'undrain', node, {}, reason, (by) => deps.undrain(node, by));
        return { ok: true };
      },
    },
    {
      method: 'GET', url: '/metrics', summary: 'Prometheus metrics of the service', produces: 'text/plain',
      handler: async (_req, reply) => {
        const text = await metrics.scrape(deps, async () => (await deps.statuses(await moves())).answered);
        void reply.type(metrics.contentType);
        return text;
      },
    },
  ];

  const document = openApiDocument(routes, Object.keys(STATIC));
  routes.push({ method: 'GET', url: '/openapi.json', summary: 'This document', handler: async () => document });
  for (const route of routes) app.route({ method: route.method, url: route.url, handler: route.handler });
  for (const [url, file] of Object.entries(STATIC)) {
    const body = fs.readFileSync(file);
    const type = CONTENT_TYPES[path.extname(file)]!;
    app.get(url, async (_req, reply) => reply.type(type).header('cache-control', 'no-cache').header('x-frame-options', 'DENY').send(body));
  }

  try {
    await app.listen({ host, port: options.port ?? 0 });
  } catch (err) {
    await sampler.stop();
    if (!options.history) history.close();
    throw err;
  }
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : options.port;
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}`,
    routes: served,
    async close() {
      await sampler.stop();
      await app.close();
      if (!options.history) history.close();
    },
  };
}
