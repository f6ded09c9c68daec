import type { Command } from 'commander';
import { auditFile, projectDataDir, readAudit } from '../../operations/audit';
import { loadEnv } from '../../worker/config';
import { defineCommand, positiveInt, print, table, type CommandDeps } from '../output';

export function register(program: Command, deps: CommandDeps): void {
  defineCommand(program, 'audit', {
    description:
      'list operator actions, newest first: who, when, what, the reason given and the outcome (from the CLI, the admin API ' +
      'and the dashboard; read from the audit log in DATA_DIR)',
    examples: ['rebalancer audit --limit 20', 'rebalancer audit --json'],
  })
    .option('--limit <n>', 'how many entries', (v) => positiveInt('--limit', v), 50)
    .option('--before <id>', 'entries older than this one (paging back)', (v) => positiveInt('--before', v))
    .action((opts: { limit: number; before?: number; json?: boolean }) => {
      const dataDir = projectDataDir(loadEnv().DATA_DIR);
      const entries = readAudit(dataDir, { limit: opts.limit, before: opts.before });
      print(deps.io, opts.json, { entries }, () =>
        entries.length === 0
          ? `no actions recorded (audit log: ${auditFile(dataDir)})`
          : table([
              ['ID', 'WHEN', 'WHO', 'FROM', 'WHAT', 'REASON', 'OUTCOME'],
              ...entries.map((e) => [String(e.id), e.at, e.actor, e.source, `${e.action}${e.target ? ` ${e.target}` : ''}`, e.reason, e.outcome]),
            ]),
      );
    });
}
