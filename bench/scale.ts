/**
 * `npm run bench -- scale [--nodes 1000] [--partitions 100000] [--join 10] [--seconds 120] [--moves 200] [--in-flight N] [--keep]`: the
 * product as `npm start` runs it (bench/product.ts: default settings, the real loop, Temporal in the way) against a reference
 * cluster of 1,000 nodes and 100,000 partitions with light traffic, while `--join` empty nodes join and the loop
 * moves copies onto them. It prints, each beside its target (issue 20): the loop's warm tick (the snapshot and plan
 * activities, from the worker's debug log), the whole read the topology model falls back to (in pages where the
 * broker offers them) and the check that passes over every record once a minute (a page at a time), the operator's
 * commands (`rebalancer status`, `nodes --json`, `moves --json`) and the admin API's pages (each the dashboard's first render waits for), the start process's RSS
 * (worker, loop and admin service), the dashboard's first render and browser work per live update in Chromium, and
 * the moves done, and the largest event and history of the loop's and the relay's runs (each payload the server
 * stored is in one event). Then, the product stopped, `--moves` follower moves at once on the moves bench's own
 * cluster, in three rounds: the relay's lag and the moves' p99 overhead beside the same-run floor (0 skips it). Each payload at 1,000
 * moves in flight, built in memory, is `npm run bench -- payloads`. With `--in-flight N` the loop and the broker's sync
 * budget let N transfers run at once (REBALANCER_MAX_TRANSFERS_PER_CLUSTER, `--cluster-limit`, and per joining node
 * their share) and each copy takes minutes, so the figures are taken with about N moves in flight (issue 20 asks for
 * the dashboard's at 1,000). `--keep` leaves the product's directory (its logs: the snapshot's parts each tick) in place.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { loadavg } from 'node:os';
import type { Client } from '@temporalio/client';
import proto from '@temporalio/proto';
import { chromium } from 'playwright-core';
import { PAGE_STATUS_MS } from '../admin/server';
import { rebalancerStatus } from '../operations/rebalancer';
import { rebalancerWorkflowId } from '../rules/definitions';
import { run as runMoves } from './moves';
import { option } from './options';
import { cli, startProduct, type Product } from './product';
import { percentile, round } from './stats';

const { temporal } = proto;
const say = (line: string) => process.stderr.write(`scale: ${line}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const TARGETS = { warmTickMs: 100, commandMs: 2_000, firstRenderMs: 1_000, updateWorkMs: 200, payloadKB: 512, relayLagMs: 1_000, floorRatio: 1.5 };
/** Where Temporal suggests continuing as new (and the loop does): 4 MiB of history. */
const HISTORY_SUGGESTED_KB = 4_096;
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const UPDATES = 10;
const FIRST_RENDERS = 3;
const RENDER_BOUND_MS = 60_000;
const UPDATE_BOUND_MS = 30_000;
const SAMPLE_EVERY_MS = 20_000;

interface LogLine {
  time: number;
  msg: string;
  component?: string;
  [k: string]: unknown;
}

function logLines(file: string): LogLine[] {
  const out: LogLine[] = [];
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      out.push(JSON.parse(line) as LogLine);
    } catch {
      // A line cut by the process's exit.
    }
  }
  return out;
}

/** The snapshot's reads, run side by side: when each was done, from the snapshot's start (activities/rebalancer.ts). */
const SNAPSHOT_PARTS = ['topologyMs', 'budgetMs', 'endsMs', 'closedMs'] as const;
type SnapshotPart = (typeof SNAPSHOT_PARTS)[number];

/** The loop's ticks from the worker's log: each snapshot with the plan after it, and how the topology was read for it. */
export function ticksOf(
  lines: LogLine[],
  from: number,
): { ms: number; snapshotMs: number; planMs: number; read: 'whole' | 'changes' | 'none'; at: number; parts: Partial<Record<SnapshotPart, number>>; wentOn: boolean }[] {
  const ticks = [];
  let read: 'whole' | 'changes' | 'none' = 'none';
  let snapshot: LogLine | null = null;
  for (const l of lines) {
    // The periodic check (a page at a time, or one whole read) runs beside the ticks (cluster/model.ts): a tick it
    // overlaps read only the changes.
    if (l.msg === 'topology read' && l.component === 'topology' && l.checked !== true && l.read !== 'page') read = l.read as 'whole' | 'changes';
    else if (l.msg === 'snapshot' && l.component === 'rebalancer') snapshot = l;
    else if (l.msg === 'planned' && l.component === 'rebalancer' && snapshot !== null) {
      if (snapshot.time >= from) {
        const [snapshotMs, planMs] = [snapshot.ms as number, l.ms as number];
        const parts = Object.fromEntries(SNAPSHOT_PARTS.filter((k) => typeof snapshot![k] === 'number').map((k) => [k, snapshot![k] as number]));
        // The snapshot went on without a visibility list still under way (`listedWithin`).
        ticks.push({ ms: snapshotMs + planMs, snapshotMs, planMs, read, at: snapshot.time, parts, wentOn: snapshot.wentOn === true });
      }
      snapshot = null;
      read = 'none';
    }
  }
  return ticks;
}

async function timed<T>(what: () => Promise<T>): Promise<number> {
  const t = performance.now();
  await what();
  return performance.now() - t;
}

/** `rebalancer <args>` as an operator types it: its wall time. */
const command = (p: Product, args: string[]): Promise<number> => timed(() => cli(p, args));

function rssMb(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : 0;
}

/**
 * The dashboard in Chromium (playwright-core, headless), as an operator opens it: the wall time from navigation to the
 * first complete refresh (nodes, moves and status drawn), in each of `FIRST_RENDERS` fresh pages (one varied from
 * 0.8 to 2.7 s between runs on this machine), then the browser's own work (script, style and layout, from the
 * DevTools Performance metrics) in each of the next live updates, the 2 s polls.
 */
async function dashboardTimes(url: string, token: string): Promise<{ firstRenderMs: number[]; updateWorkMs: number[]; timedOut: string[] } | { skipped: string }> {
  if (!existsSync(CHROMIUM)) return { skipped: `no browser at ${CHROMIUM} (apt-get install -y chromium, or set CHROMIUM_PATH)` };
  const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu'] });
  try {
    // Page code as strings: this project's TypeScript has no DOM types.
    const drawn = "document.querySelectorAll('.node.row').length > 0 && /^updated /.test(document.getElementById('updated')?.textContent ?? '')";
    const firstRenderMs: number[] = [];
    // A page that does not draw (or update) within its bound counts at the bound and is named: an overloaded stack is
    // a figure too, not a benchmark that stops without printing one.
    const timedOut: string[] = [];
    const open = async () => {
      const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
      const started = performance.now();
      await page.goto(`${url}/#token=${token}`);
      const ok = await page.waitForFunction(drawn, undefined, { timeout: RENDER_BOUND_MS }).then(() => true, () => false);
      if (!ok) timedOut.push(`a first render past ${RENDER_BOUND_MS / 1000} s`);
      firstRenderMs.push(performance.now() - started);
      return page;
    };
    for (let i = 1; i < FIRST_RENDERS; i++) await (await open()).close();
    // The last page opened stays, for the live updates.
    const page = await open();
    const cdp = await page.context().newCDPSession(page);
    await cdp.send('Performance.enable');
    const work = async (): Promise<number> => {
      const m = new Map((await cdp.send('Performance.getMetrics')).metrics.map((x) => [x.name, x.value]));
      return ((m.get('ScriptDuration') ?? 0) + (m.get('LayoutDuration') ?? 0) + (m.get('RecalcStyleDuration') ?? 0)) * 1000;
    };
    const updated = () => page.evaluate<string>("document.getElementById('updated')?.textContent ?? ''");
    const updateWorkMs: number[] = [];
    for (let i = 0; i < UPDATES; i++) {
      const [before, w0] = [await updated(), await work()];
      const ok = await page
        .waitForFunction(`document.getElementById('updated')?.textContent !== ${JSON.stringify(before)}`, undefined, { timeout: UPDATE_BOUND_MS })
        .then(() => true, () => false);
      if (!ok) {
        timedOut.push(`no live update for ${UPDATE_BOUND_MS / 1000} s`);
        break;
      }
      updateWorkMs.push((await work()) - w0);
    }
    return { firstRenderMs, updateWorkMs, timedOut };
  } finally {
    await browser.close();
  }
}

/**
 * Every run of the loop and of the relay (the two that live long) in this benchmark: the largest history, and the
 * largest event in any of them, which bounds the largest payload the server stored (an event holds the payloads of
 * one input, result or marker).
 */
async function histories(client: Client, scope: string): Promise<{ largestHistoryKB: number; largestHistoryEvents: number; largestEventKB: number; largestEventType: string; runs: number }> {
  const out = { largestHistoryKB: 0, largestHistoryEvents: 0, largestEventKB: 0, largestEventType: '-', runs: 0 };
  const query = `WorkflowId = "${rebalancerWorkflowId(scope)}" OR WorkflowId = "progress-relay-${scope}"`;
  for await (const wf of client.workflow.list({ query })) {
    out.runs++;
    const history = await client.workflow.getHandle(wf.workflowId, wf.runId).fetchHistory();
    let bytes = 0;
    for (const event of history.events ?? []) {
      const size = temporal.api.history.v1.HistoryEvent.encode(event).finish().length;
      bytes += size;
      if (size / 1024 > out.largestEventKB) Object.assign(out, { largestEventKB: round(size / 1024), largestEventType: temporal.api.enums.v1.EventType[event.eventType ?? 0] ?? '?' });
    }
    if (bytes / 1024 > out.largestHistoryKB) Object.assign(out, { largestHistoryKB: round(bytes / 1024), largestHistoryEvents: history.events?.length ?? 0 });
  }
  return out;
}

/**
 * The whole reads the model fell back to, since the product started: at its start (the first reader, the loop or the
 * admin service, which share it) and after a 410. The check beside the reads is not one.
 */
export function wholeReads(lines: LogLine[]): number[] {
  return lines.filter((l) => l.msg === 'topology read' && l.component === 'topology' && l.read === 'whole' && l.checked !== true).map((l) => l.ms as number);
}

const stat = (xs: number[]) => (xs.length === 0 ? null : { n: xs.length, p50: Math.round(percentile(xs, 50)), p90: Math.round(percentile(xs, 90)), max: Math.round(Math.max(...xs)) });

export async function run(args: string[]): Promise<void> {
  const nodes = option(args, '--nodes', 1000);
  const partitions = option(args, '--partitions', 100_000);
  const joining = option(args, '--join', 10);
  const seconds = option(args, '--seconds', 120);
  const inFlight = option(args, '--moves', 200, true);
  const held = option(args, '--in-flight', 0, true);
  const keep = args.includes('--keep');
  const limits = held > 0 ? heldInFlight(held, joining) : { shape: {}, env: {} };
  const shape = { clock: 'wall', nodes, partitions, streams: 0, 'publish-rate': 1, 'initial-messages': 1000, 'tick-ms': 1000, ...limits.shape };
  const token = randomBytes(18).toString('base64url');
  say(`${nodes} nodes, ${partitions} partitions, ${joining} joining, ${seconds} s of moves${held > 0 ? `, up to ${held} in flight` : ''}; load ${loadavg()[0]!.toFixed(1)}`);
  const p = await startProduct('scale', shape, say, { env: { LOG_LEVEL: 'debug', ADMIN_TOKEN: token, ...limits.env }, startTimeoutMs: 900_000, clusterStartTimeoutMs: 600_000 });
  try {
    say('waiting for three ticks of the loop');
    for (let i = 0; ticksOf(logLines(p.log), 0).length < 3; i++) {
      if (i > 300) throw new Error(`the loop did not tick three times in 10 minutes; see ${p.log}`);
      await sleep(2_000);
    }
    const joinedAt = Date.now();
    for (let i = 1; i <= joining; i++) await p.cluster.joinNode(`x${i}`, 1, `z${((i - 1) % 3) + 1}`);
    say(`${joining} nodes joined; sampling every ${SAMPLE_EVERY_MS / 1000} s for ${seconds} s`);
    const samples: Record<string, number[]> = { status: [], nodes: [], moves: [], apiStatus: [], apiNodes: [], apiMoves: [], apiHistory: [], rssMb: [], inFlight: [] };
    const api = (path: string) => () => fetch(`http://127.0.0.1:${p.adminPort}${path}`, { headers: { authorization: `Bearer ${token}` } }).then((r) => r.text());
    // A status the service could not answer (the loop's query failed under load) is counted apart, not as a count.
    let statusFailures = 0;
    const running = async (): Promise<number | null> => {
      const n = (JSON.parse(await api('/api/status')()) as { movesRunning?: number }).movesRunning;
      if (typeof n === 'number') return n;
      statusFailures++;
      return null;
    };
    while (Date.now() - joinedAt < seconds * 1000) {
      await sleep(SAMPLE_EVERY_MS);
      samples.status!.push(await command(p, ['status']));
      samples.nodes!.push(await command(p, ['nodes', '--json']));
      samples.moves!.push(await command(p, ['moves', '--json']));
      samples.apiStatus!.push(await timed(api('/api/status')));
      samples.apiNodes!.push(await timed(api('/api/nodes')));
      // The dashboard's other two first-render reads, as it asks them.
      samples.apiMoves!.push(await timed(api('/api/moves?offset=0&limit=50&recent=10')));
      samples.apiHistory!.push(await timed(api('/api/history')));
      samples.rssMb!.push(rssMb(p.pid));
      const inFlight = await running();
      if (inFlight !== null) samples.inFlight!.push(inFlight);
      say(`${Math.round((Date.now() - joinedAt) / 1000)} s: ${inFlight ?? '?'} moves in flight, status ${Math.round(samples.status!.at(-1)!)} ms, nodes ${Math.round(samples.nodes!.at(-1)!)} ms, RSS ${Math.round(samples.rssMb!.at(-1)!)} MB`);
    }
    say('the dashboard in Chromium');
    const inFlightAtDashboard = await running();
    const dashboard = await dashboardTimes(`http://127.0.0.1:${p.adminPort}`, token);
    const lines = logLines(p.log);
    const ticks = ticksOf(lines, joinedAt);
    // The check: a page at a time where the broker offers pages (each from its request to its place in the model).
    const checks = lines.filter((l) => l.msg === 'topology read' && l.component === 'topology' && (l.checked === true || l.read === 'page') && l.time >= joinedAt).map((l) => l.ms as number);
    const warm = ticks.filter((t) => t.read === 'changes');
    // An overloaded stack may not answer the loop's query: the figures are printed all the same.
    const moves = await rebalancerStatus(p.client, p.scope).then((s) => s.moves, (err: unknown) => `the loop's status query failed: ${(err as Error).message}`);
    say('the loop\'s and the relay\'s histories');
    const history = await histories(p.client, p.scope);
    const result = {
      bench: 'scale',
      shape: { nodes, partitions, joining, seconds, ...(held > 0 ? { inFlight: held } : {}) },
      movesInFlight: { sampled: stat(samples.inFlight!), atDashboard: inFlightAtDashboard, statusFailures },
      load: round(loadavg()[0]!),
      warmTickMs: stat(warm.map((t) => t.ms)),
      warmSnapshotMs: stat(warm.map((t) => t.snapshotMs)),
      warmPlanMs: stat(warm.map((t) => t.planMs)),
      warmTicksWithoutAList: warm.filter((t) => t.wentOn).length,
      warmSnapshotPartsMs: Object.fromEntries(SNAPSHOT_PARTS.map((k) => [k, stat(warm.flatMap((t) => (t.parts[k] === undefined ? [] : [t.parts[k]])))])),
      wholeReadMs: stat(wholeReads(lines)),
      checkReadMs: stat(checks),
      commandsMs: { status: stat(samples.status!), nodes: stat(samples.nodes!), moves: stat(samples.moves!) },
      adminApiMs: { status: stat(samples.apiStatus!), nodes: stat(samples.apiNodes!), moves: stat(samples.apiMoves!), history: stat(samples.apiHistory!) },
      startProcessRssMb: stat(samples.rssMb!),
      dashboard: 'skipped' in dashboard ? dashboard : { firstRenderMs: stat(dashboard.firstRenderMs), updateWorkMs: stat(dashboard.updateWorkMs), timedOut: dashboard.timedOut },
      moves,
      history,
    };
    process.stdout.write(`${JSON.stringify(result)}\n`);
    const row = (what: string, s: ReturnType<typeof stat>, target: string) =>
      say(`${what.padEnd(38)} ${s === null ? 'none'.padStart(26) : `p50 ${String(s.p50).padStart(7)}  p90 ${String(s.p90).padStart(7)}  max ${String(s.max).padStart(7)}`}  (n ${s?.n ?? 0})  ${target}`);
    say(`after ${seconds} s, at load ${result.load}:`);
    row('warm tick (snapshot + plan), ms', result.warmTickMs, `target ${TARGETS.warmTickMs} ms`);
    row('  of which the snapshot, ms', result.warmSnapshotMs, '');
    for (const [k, v] of Object.entries(result.warmSnapshotPartsMs)) row(`    snapshot's ${k.replace(/Ms$/, '')} read done, ms`, v, 'side by side');
    row('  of which the plan, ms', result.warmPlanMs, '');
    say(`  ${result.warmTicksWithoutAList} of ${warm.length} warm ticks went on without a visibility list, as long as the broker's reads took and 25 ms more`);
    row('whole read (the fallback), ms', result.wholeReadMs, 'at start, after a 410; a tick waits for it');
    row('the check, a page (or a whole read) at a time, ms', result.checkReadMs, 'a pass a minute, 2,000 records a page, beside the ticks');
    row('rebalancer status, ms', result.commandsMs.status, `target ${TARGETS.commandMs} ms`);
    row('rebalancer nodes --json, ms', result.commandsMs.nodes, `target ${TARGETS.commandMs} ms`);
    row('rebalancer moves --json, ms', result.commandsMs.moves, `target ${TARGETS.commandMs} ms`);
    row('admin /api/status, ms', result.adminApiMs.status, '');
    row('admin /api/nodes, ms', result.adminApiMs.nodes, '');
    row('admin /api/moves (a page of 50), ms', result.adminApiMs.moves, `waits at most ${PAGE_STATUS_MS} ms for its queries`);
    row('admin /api/history, ms', result.adminApiMs.history, '');
    row('npm start process RSS, MB', result.startProcessRssMb, 'worker, loop and admin service');
    row('moves in flight when sampled', result.movesInFlight.sampled, `${inFlightAtDashboard ?? '?'} when the dashboard opened; /api/status failed ${statusFailures} time(s)`);
    if ('skipped' in dashboard) say(`dashboard: skipped, ${dashboard.skipped}`);
    else {
      row('dashboard first render, ms', stat(dashboard.firstRenderMs), `target ${TARGETS.firstRenderMs} ms`);
      row('dashboard browser work per update, ms', stat(dashboard.updateWorkMs), `target ${TARGETS.updateWorkMs} ms`);
      if (dashboard.timedOut.length > 0) say(`dashboard timed out: ${dashboard.timedOut.join('; ')}`);
    }
    say(
      `largest event in the loop's and relay's ${history.runs} run(s): ${history.largestEventKB} KB (${history.largestEventType}), target ${TARGETS.payloadKB} KB; ` +
        `largest history ${history.largestHistoryKB} KB in ${history.largestHistoryEvents} events, continue-as-new suggested at ${HISTORY_SUGGESTED_KB} KB`,
    );
    say(`moves: ${JSON.stringify(moves)}`);
  } finally {
    await p.close();
    if (keep) say(`kept ${p.dir} (the product's logs and data)`);
    else rmSync(p.dir, { recursive: true, force: true });
  }
  if (inFlight > 0) await movesBeside(inFlight);
}

/**
 * Settings that let `n` moves run at once and keep them running while the figures are taken: the loop's transfer
 * limits, and the broker's sync budget, at n cluster-wide and each joining node's share per node; copies at 20 KB/s per
 * node (a partition's 1 MB then takes minutes), so the moves stay in flight.
 */
function heldInFlight(n: number, joining: number): { shape: Record<string, number>; env: Record<string, string> } {
  const perNode = Math.max(2, Math.ceil(n / Math.max(1, joining)));
  return {
    shape: { 'cluster-limit': n, 'per-node-limit': perNode, 'transfer-rate': 20_000 },
    env: { REBALANCER_MAX_TRANSFERS_PER_CLUSTER: String(n), REBALANCER_MAX_TRANSFERS_PER_NODE: String(perNode) },
  };
}

/**
 * Rounds of the moves bench the figures are taken from. One round's ratio to its floor has spanned 1.1-1.6 on this
 * machine with the same code (2026-12-05: the floor's own p99 5.7-8.3 s, the moves' 7.5-11.8 s), as the load beside
 * them moves; the figure is the median round's, every round printed.
 */
const MOVE_ROUNDS = 3;

/**
 * Issue 20's relay and move figures, once the product has stopped: `npm run bench -- moves --n N,N,N` on its own dev
 * server and cluster (40 nodes): the relay's lag from a learner's admission to its signal (the worst round's p99), and
 * the moves' p99 overhead beside the p99 of as many workflows of a move's shape with nothing behind them, run the same
 * minute (the median round's ratio).
 */
async function movesBeside(n: number): Promise<void> {
  const sizes = Array.from({ length: MOVE_ROUNDS }, () => n).join(',');
  say(`${n} follower moves at once beside the same-shape floor, ${MOVE_ROUNDS} rounds (npm run bench -- moves --n ${sizes})`);
  const lines = await runMoves(['--n', sizes]);
  const of = (mode: string) => lines.filter((l) => l.mode === mode);
  const ratios = of('ratio temporal/direct').map((l) => l.overhead_p99_to_floor_p99 as number);
  const lags = of('temporal').map((l) => l.relay_admitted_lag_ms_p99 as number);
  const figures = {
    bench: 'scale',
    part: `moves bench, ${n} at once, ${MOVE_ROUNDS} rounds`,
    relayLagMsP99: Math.max(...lags),
    relayLagMsP99Rounds: lags,
    overheadP99ToFloorP99: percentile(ratios, 50),
    overheadP99ToFloorP99Rounds: ratios,
    movesPerMinute: percentile(of('temporal').map((l) => l.moves_per_minute as number), 50),
  };
  process.stdout.write(`${JSON.stringify(figures)}\n`);
  say(`relay lag, admission to signal, p99: ${String(figures.relayLagMsP99)} ms in the worst round (${lags.join(', ')}), target ${TARGETS.relayLagMs} ms`);
  say(`moves' overhead p99 / same-run floor p99: ${String(figures.overheadP99ToFloorP99)} in the median round (${ratios.join(', ')}), target ${TARGETS.floorRatio}`);
  say(`moves per minute at ${n} in flight: ${String(figures.movesPerMinute)} (median round)`);
}
