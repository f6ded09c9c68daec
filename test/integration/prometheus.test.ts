/**
 * The shipped Prometheus setup against a running stack: `npm start` (dev server, reference cluster, worker and
 * admin service, with the demo's node joining), and Debian's Prometheus on 127.0.0.1 with monitoring/prometheus.yml
 * pointed at this run's ports. Once it has scraped, every alert of monitoring/rules.yml is loaded, and every
 * expression a rule or a dashboard panel evaluates returns series through the HTTP API: a misspelt series, a
 * label that does not exist or a series the service stopped exporting fails here. An alert's condition is
 * evaluated without its threshold (the series it compares), since a healthy stack fires none.
 * Without /usr/bin/prometheus the file fails in CI (.ci/run installs it) and is skipped locally, saying so.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../scripts/dev-server';
import { onPath } from '../../scripts/temporal-cli';
import { killLeftovers, ownEnv, root, start } from './start-harness';
import { descendants } from './processes';

const PROMETHEUS = onPath('prometheus');
if (!PROMETHEUS && !process.env.CI) {
  console.warn("prometheus tests skipped: no prometheus on PATH (install Debian's: apt-get install -y prometheus)");
}
const monitoring = path.join(root, 'monitoring');
const TOKEN = 'prometheus-test-token-0123456789';

interface Panel {
  title: string;
  type: string;
  targets?: { expr: string }[];
}
interface Rule {
  type: 'alerting' | 'recording';
  name: string;
  query: string;
}

describe.skipIf(!PROMETHEUS && !process.env.CI)('the shipped Prometheus setup on a running stack', () => {
  let env: Awaited<ReturnType<typeof ownEnv>>;
  let run: Awaited<ReturnType<typeof start>>;
  let prometheus: ChildProcess | undefined;
  let promOutput = '';
  let api = '';
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'prometheus-test-'));

  beforeAll(async () => {
    if (!PROMETHEUS) throw new Error("no prometheus on PATH: .ci/run installs Debian's prometheus (apt-get install -y prometheus)");
    env = { ...(await ownEnv()), ADMIN_TOKEN: TOKEN, TEMPORAL_TASK_QUEUE: 'prometheus-test' };
    run = await start(env);
    // The shipped file with this run's ports, a 2 s scrape and the rules by absolute path: nothing else changes.
    const config = fs
      .readFileSync(path.join(monitoring, 'prometheus.yml'), 'utf8')
      .replace("'127.0.0.1:7390'", `'127.0.0.1:${env.ADMIN_PORT}'`)
      .replace("'127.0.0.1:9464'", `'127.0.0.1:${env.WORKER_METRICS_PORT}'`)
      .replace(/(scrape|evaluation)_interval: 15s/g, '$1_interval: 2s')
      .replace('scrape_timeout: 10s', 'scrape_timeout: 2s')
      .replace('- rules.yml', `- ${path.join(monitoring, 'rules.yml')}`);
    expect(config, 'the shipped file has both default targets and its rules').toContain(`'127.0.0.1:${env.WORKER_METRICS_PORT}'`);
    fs.writeFileSync(path.join(scratch, 'prometheus.yml'), config);
    const port = await freePort();
    api = `http://127.0.0.1:${port}`;
    prometheus = spawn(
      PROMETHEUS,
      [`--config.file=${path.join(scratch, 'prometheus.yml')}`, `--storage.tsdb.path=${path.join(scratch, 'data')}`, `--web.listen-address=127.0.0.1:${port}`],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    prometheus.stdout!.on('data', (d: Buffer) => (promOutput = (promOutput + d.toString()).slice(-4000)));
    prometheus.stderr!.on('data', (d: Buffer) => (promOutput = (promOutput + d.toString()).slice(-4000)));
    const deadline = Date.now() + 60_000;
    while (!(await fetch(`${api}/-/ready`).then((r) => r.ok, () => false))) {
      if (Date.now() > deadline || prometheus.exitCode !== null) throw new Error(`prometheus did not become ready: ${promOutput}`);
      await new Promise((r) => setTimeout(r, 250));
    }
  }, 300_000);

  afterAll(async () => {
    if (prometheus && prometheus.exitCode === null) {
      const exited = new Promise((resolve) => prometheus!.once('exit', resolve));
      prometheus.kill('SIGTERM');
      await exited;
    }
    if (run) {
      const started = descendants(run.child.pid!);
      const exited = new Promise((resolve) => run.child.once('exit', resolve));
      run.child.kill('SIGTERM');
      await exited;
      killLeftovers(started, env.DATA_DIR);
    }
    if (env) fs.rmSync(env.DATA_DIR, { recursive: true, force: true });
    fs.rmSync(scratch, { recursive: true, force: true });
  });

  async function query(expr: string): Promise<{ status: string; error?: string; data?: { result: unknown[] } }> {
    const r = await fetch(`${api}/api/v1/query?query=${encodeURIComponent(expr)}`);
    return (await r.json()) as { status: string; error?: string; data?: { result: unknown[] } };
  }

  it('loads every alert of rules.yml, and every rule and panel expression returns series', async () => {
    const rules = ((await (await fetch(`${api}/api/v1/rules`)).json()) as { data: { groups: { rules: Rule[] }[] } }).data.groups.flatMap((g) => g.rules);
    expect(rules.filter((r) => r.type === 'alerting').map((r) => r.name).sort()).toEqual([
      'RebalancerInvariantBreach',
      'RebalancerLoopNotTicking',
      'RebalancerMetricsDown',
      'RebalancerMoveBlocked',
      'RebalancerPausedTooLong',
      'RebalancerRecoveryPending',
      'RebalancerRelayLag',
    ]);

    // A refused request, so the refusals counter has a series (it has one per code seen).
    const refused = await fetch(`http://127.0.0.1:${env.ADMIN_PORT}/api/moves`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ kind: 'follower-move', partition: 'q-0', from: 'n1', to: 'n1', reason: 'prometheus test: a refusal' }),
    });
    expect(refused.status).toBeGreaterThanOrEqual(400);

    const dashboard = JSON.parse(fs.readFileSync(path.join(monitoring, 'grafana-dashboard.json'), 'utf8')) as { panels: Panel[] };
    const expressions = new Map<string, string>();
    for (const rule of rules) {
      // An alert's condition without its comparison with a constant: the series it watches.
      const watched = rule.type === 'alerting' ? rule.query.replace(/\s*(>|<|==|!=|>=|<=)\s*[\d.e+]+$/, '') : rule.query;
      expressions.set(`rule ${rule.name}: ${watched}`, watched);
    }
    for (const panel of dashboard.panels.filter((p) => p.type !== 'row')) {
      expect(panel.targets?.length, `panel ${panel.title} has a query`).toBeGreaterThan(0);
      // Grafana's interval variables, as it would fill them in at this scrape interval.
      for (const t of panel.targets!) expressions.set(`panel ${panel.title}: ${t.expr}`, t.expr.replaceAll('$__rate_interval', '1m'));
    }

    // The demo's moves come and go: each expression gets until they have run for a while to show a series.
    const missing = new Map(expressions);
    const deadline = Date.now() + 240_000;
    while (missing.size > 0 && Date.now() < deadline) {
      for (const [what, expr] of missing) {
        const answer = await query(expr);
        expect(answer.status, `${what}: ${answer.error}`).toBe('success');
        if (answer.data!.result.length > 0) missing.delete(what);
      }
      if (missing.size > 0) await new Promise((r) => setTimeout(r, 1_000));
    }
    expect([...missing.keys()], `no series within 4 minutes of npm start's demo:\n${run.output().slice(-2000)}`).toEqual([]);
  }, 400_000);
});
