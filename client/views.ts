/**
 * What `status` and `nodes` compute from the whole topology (under-replicated partitions, every node's scores), and
 * the moves in progress `moves` lists, taken from the admin service when it runs for the same broker, namespace and
 * task queue: it keeps the topology current from the broker's changes read, where the CLI would read it whole (65 MB
 * and about 2 s at 100,000 partitions), asks the loop for its status, where the CLI would load a Temporal client
 * first, and keeps the list of moves and each one's last answer (1,000 in progress took the CLI 3.3 s to list and
 * ask). With no such service answering, the CLI asks Temporal and reads the broker whole itself.
 */
import type { Topology } from '../cluster/contract';
import type { UnderReplicated } from '../planner';
import { loopUnderReplicated } from '../operations/rebalancer';
import { byNodeId, type ScoresView } from '../operations/scores';
import type { EndedMove, MoveInProgress } from '../operations/moves';
import type { MoveStatus, RebalancerStatus } from '../rules/definitions';
import { loadAdminEnv, loadEnv, temporalSettings } from '../worker/config';
import { brokerOf, brokerUnreachable } from './output';

/** Where a view came from: the admin service, a whole read of the broker, or Temporal asked directly (`moves`). */
export interface ReadFrom {
  via: 'admin' | 'broker' | 'temporal';
  url: string;
}

/** The admin API's largest page of nodes (admin/schemas.ts): a cluster's whole list in one reply, so the rows agree with the mean. */
const NODES_PAGE = 10_000;

/** The admin service answers within this, or the CLI reads the broker itself. */
const ADMIN_WAIT_MS = 3_000;

/** ADMIN_URL, else the port `npm start` serves the admin API on, on this machine. */
function adminUrl(): { url: string; token: string | undefined } {
  const env = loadAdminEnv();
  return { url: (env.ADMIN_URL ?? `http://127.0.0.1:${env.ADMIN_PORT}`).replace(/\/+$/, ''), token: env.ADMIN_TOKEN };
}

/** The broker, namespace and task queue the CLI works on: an admin service's answer counts only if it names the same. */
function ownSource(): { broker: string; namespace: string; taskQueue: string } {
  const env = loadEnv();
  const { namespace, taskQueue } = temporalSettings(env, '');
  return { broker: brokerOf(env).baseUrl, namespace, taskQueue };
}

/**
 * `path` of the admin API, or null when no admin service answers it for this broker in time (none listening, another
 * service on the port, another broker or task queue, an error): the caller then reads the broker whole. `waitsMs`:
 * what the path asks the service to wait for, added to the time allowed.
 */
async function fromAdmin<T>(path: string, waitsMs = 0): Promise<{ reply: T; from: ReadFrom } | null> {
  const { url, token } = adminUrl();
  try {
    const res = await fetch(`${url}${path}`, {
      headers: token ? { authorization: `Bearer ${token}` } : {},
      // Beside what the service is asked to wait for itself (the moves' queries).
      signal: AbortSignal.timeout(ADMIN_WAIT_MS + waitsMs),
    });
    if (!res.ok) return null;
    const reply = (await res.json()) as T & { source?: { broker?: string; namespace?: string; taskQueue?: string } };
    const own = ownSource();
    const theirs = reply.source;
    if (theirs?.broker !== own.broker || theirs.namespace !== own.namespace || theirs.taskQueue !== own.taskQueue) return null;
    return { reply, from: { via: 'admin', url } };
  } catch {
    return null;
  }
}

/** The broker's topology read whole; a broker that does not answer is exit 3. */
export async function wholeTopology(): Promise<Topology> {
  const cluster = brokerOf(loadEnv());
  return cluster.topology().catch((err: unknown) => {
    // fetch's own failure (no answer); an HTTP error or a body that breaks the contract says so itself.
    throw err instanceof TypeError ? brokerUnreachable(cluster, err) : err;
  });
}

/** Every node's scores and bands, from the admin service (all nodes in one page, by id) or computed here. */
export async function nodesView(compute: (topology: Topology) => Promise<ScoresView>): Promise<{ view: ScoresView; from: ReadFrom }> {
  type Page = ScoresView & { source: unknown; total: number; offset: number; limit: number; maxTotal: number };
  const admin = await fromAdmin<Page>(`/api/nodes?sort=id&limit=${NODES_PAGE}`);
  if (admin && Array.isArray(admin.reply.nodes) && admin.reply.total === admin.reply.nodes.length) {
    const { nodes, weights, mean, upper, lower, spread } = admin.reply;
    return { view: { nodes, weights, mean, upper, lower, spread }, from: admin.from };
  }
  const view = await compute(await wholeTopology());
  view.nodes.sort(byNodeId);
  return { view, from: { via: 'broker', url: brokerOf(loadEnv()).baseUrl } };
}

/**
 * The loop's status with the under-replicated partitions, from the admin service (which asks the loop) or from the
 * loop's query and a whole read here.
 */
export async function statusView(
  direct: () => Promise<{ status: RebalancerStatus; whole: Topology }>,
): Promise<{ status: RebalancerStatus & { asOf?: string }; under: UnderReplicated[]; from: ReadFrom }> {
  const admin = await fromAdmin<RebalancerStatus & { asOf?: string; underReplicated: UnderReplicated[]; source: unknown }>('/api/rebalancer');
  if (admin && Array.isArray(admin.reply.underReplicated)) {
    const { underReplicated: under, source: _source, ...status } = admin.reply;
    return { status, under, from: admin.from };
  }
  const { status, whole } = await direct();
  return { status, under: loopUnderReplicated(whole, status), from: { via: 'broker', url: brokerOf(loadEnv()).baseUrl } };
}

/** Moves in progress (those whose status query was late in `late`, or with `asOf` when an earlier answer is shown) and recently ended. */
export interface MovesView {
  running: (MoveStatus & { asOf?: string })[];
  late: MoveInProgress[];
  ended: EndedMove[];
}

/** The admin API's largest page of moves, and of ended moves (`/api/moves?limit&recent`). */
const MOVES_PAGE = 10_000;
const ADMIN_RECENT = 100;

/** How long `moves` waits for the moves' status answers from Temporal unless told: a late one shows only its phase. */
export const DIRECT_WAIT_MS = 1_000;

/**
 * Every move in progress and the `recent` that ended last, from the admin service (one page of every move, its
 * queries waited for `waitMs`, or the service's page bound when not given: a move late there shows its last answer)
 * or from Temporal directly (waited for `waitMs`, DIRECT_WAIT_MS when not given); `waitedMs`, how long it was.
 */
export async function movesView(
  recent: number,
  waitMs: number | undefined,
  direct: (waitMs: number) => Promise<{ view: MovesView; address: string }>,
): Promise<{ view: MovesView; from: ReadFrom; waitedMs: number }> {
  type Page = { running: MovesView['running']; late: MoveInProgress[]; recent: EndedMove[]; total: number; waitedMs?: number; source: unknown };
  const wait = waitMs === undefined ? '' : `&wait=${waitMs}`;
  const directWaitMs = waitMs ?? DIRECT_WAIT_MS;
  const admin = recent <= ADMIN_RECENT ? await fromAdmin<Page>(`/api/moves?limit=${MOVES_PAGE}&recent=${recent}${wait}`, directWaitMs) : null;
  // Every move in one page, or the CLI lists them itself.
  if (admin && admin.reply.total <= MOVES_PAGE && Array.isArray(admin.reply.running) && Array.isArray(admin.reply.late) && Array.isArray(admin.reply.recent)) {
    const { running, late, recent: ended } = admin.reply;
    return { view: { running, late, ended }, from: admin.from, waitedMs: admin.reply.waitedMs ?? directWaitMs };
  }
  const { view, address } = await direct(directWaitMs);
  return { view, from: { via: 'temporal', url: address }, waitedMs: directWaitMs };
}

/** The line a view's output ends with: where what it shows (`topology`, or the `moves` list) came from. */
export function readFromLine(from: ReadFrom, what: 'topology' | 'moves' = 'topology'): string {
  const where = { admin: 'through the admin service at', broker: 'read whole from the broker at', temporal: 'from Temporal at' }[from.via];
  return `${what}: ${where} ${from.url}`;
}
