/**
 * The shipped Prometheus setup, checked by Debian's promtool: the configuration and the rules are valid, and the
 * unit tests in monitoring/rules.test.yml (each alert firing past its setting, quiet short of it, with its
 * runbook) pass. The Grafana dashboard imports as exported dashboards do: one datasource input, every panel on
 * it. Without promtool on PATH the promtool checks fail in CI (.ci/run installs it) and are skipped locally.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { onPath } from '../../scripts/temporal-cli';

const monitoring = path.resolve(import.meta.dirname, '../../monitoring');
const PROMTOOL = onPath('promtool');
if (!PROMTOOL && !process.env.CI) console.warn("promtool checks skipped: no promtool on PATH (install Debian's prometheus: apt-get install -y prometheus)");

function promtool(...args: string[]): { status: number | null; output: string } {
  if (!PROMTOOL) throw new Error("no promtool on PATH: .ci/run installs Debian's prometheus (apt-get install -y prometheus)");
  const r = spawnSync(PROMTOOL, args, { cwd: monitoring, encoding: 'utf8' });
  return { status: r.status, output: r.stdout + r.stderr };
}

describe.skipIf(!PROMTOOL && !process.env.CI)('promtool', () => {
  it('finds the scrape configuration and its rule file valid', () => {
    const r = promtool('check', 'config', 'prometheus.yml');
    expect(r.status, r.output).toBe(0);
    expect(r.output).toContain('SUCCESS: 1 rule files found');
  });

  it('finds every rule valid', () => {
    const r = promtool('check', 'rules', 'rules.yml');
    expect(r.status, r.output).toBe(0);
  });

  it("passes the alerts' unit tests", () => {
    const r = promtool('test', 'rules', 'rules.test.yml');
    expect(r.status, r.output).toBe(0);
    expect(r.output).toContain('SUCCESS');
  });
});

describe('the Grafana dashboard', () => {
  const dashboard = JSON.parse(fs.readFileSync(path.join(monitoring, 'grafana-dashboard.json'), 'utf8')) as {
    __inputs: { name: string; type: string; pluginId: string }[];
    uid: string;
    panels: { type: string; title: string; gridPos: { x: number; w: number }; datasource?: { uid: string }; targets?: { expr: string; datasource: { uid: string } }[] }[];
  };

  it('asks for one Prometheus datasource on import, and every panel and query uses it', () => {
    expect(dashboard.__inputs).toEqual([expect.objectContaining({ name: 'DS_PROMETHEUS', type: 'datasource', pluginId: 'prometheus' })]);
    expect(dashboard.uid).toBe('live-rebalancer');
    for (const panel of dashboard.panels.filter((p) => p.type !== 'row')) {
      expect(panel.datasource?.uid, panel.title).toBe('${DS_PROMETHEUS}');
      expect(panel.targets?.length, panel.title).toBeGreaterThan(0);
      for (const t of panel.targets!) expect(t.datasource.uid, panel.title).toBe('${DS_PROMETHEUS}');
    }
  });

  // The Temporal SDK's series are checked against a running worker (test/integration/prometheus.test.ts).
  it("names only the admin service's own series among the rebalancer_ ones", () => {
    const exported = new Set([...fs.readFileSync(path.resolve(monitoring, '../admin/metrics.ts'), 'utf8').matchAll(/'(rebalancer_[a-z_]+)'/g)].map((m) => m[1]));
    for (const panel of dashboard.panels) {
      for (const t of panel.targets ?? []) {
        for (const [name] of t.expr.matchAll(/\brebalancer_[a-z_]+/g)) expect(exported, `${panel.title}: ${name}`).toContain(name);
      }
    }
  });
});
