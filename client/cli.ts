/**
 * `rebalancer`: what operators run. Reads the same environment as the worker (TEMPORAL_*, CLUSTER_URL).
 * The commands live in client/commands/ (one module each, listed in client/commands/index.ts); what they share is
 * in client/output.ts. This file builds the program and maps failures to exit codes and the --json refusal shape.
 */
import { createRequire } from 'node:module';
import { Command, CommanderError } from 'commander';
import { ConfigError } from '../worker/config';
import { COMMANDS } from './commands';
import { MoveRefused } from '../operations/moves';
import { auditCliAction, connect, EXIT, takeAction, Unreachable, type Io } from './output';

export { EXIT } from './output';

const { version } = createRequire(import.meta.url)('../package.json') as { version: string };

const EXIT_HELP = `
Exit status:
  0  done
  1  refused, or the reconfiguration did not complete (--wait)
  2  bad usage or configuration
  3  a server (Temporal or the broker) does not answer

Every command takes --json: one JSON object on stdout; a refusal prints {"ok": false, "code", "message"}.

Example:
  $ rebalancer move q-3 --from n2 --to n5 --wait`;

/** `result.exitCode` is set by a command that ran but did not succeed (a --wait move that did not complete). */
export function buildCli(io: Io, result = { exitCode: EXIT.done as number }): Command {
  const program = new Command('rebalancer')
    .description(
      'Operate live reconfigurations of a replicated queue broker. Every reconfiguration is a durable Temporal ' +
        'workflow; settings come from the environment (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_TASK_QUEUE, ' +
        'CLUSTER_URL, ...; see docs/configuration.md).',
    )
    .version(version)
    .exitOverride()
    .configureOutput({ writeOut: io.out, writeErr: io.err })
    .showHelpAfterError()
    .addHelpText('after', EXIT_HELP);
  // Subcommands inherit exitOverride and the output settings above when created.
  for (const command of COMMANDS) command.register(program, { io, result, connect });
  return program;
}

/** Runs the CLI; returns the exit status instead of exiting, so tests can call it. */
export async function runCli(
  argv: string[],
  io: Io = { out: (t) => process.stdout.write(t), err: (t) => process.stderr.write(t), terminal: process.stdout.isTTY ? process.stdout : undefined },
): Promise<number> {
  const result = { exitCode: EXIT.done as number };
  const program = buildCli(io, result);
  // A script that asked for JSON gets its failure as JSON on stdout too; people read the line on stderr.
  const fail = (exitCode: number, code: string, message: string, line: string): number => {
    if (argv.includes('--json')) io.out(JSON.stringify({ ok: false, code, message }) + '\n');
    io.err(line + '\n');
    return exitCode;
  };
  takeAction();
  try {
    await program.parseAsync(argv, { from: 'user' });
    auditCliAction(takeAction(), result.exitCode === EXIT.done ? 'ok' : 'did not complete', io);
    return result.exitCode;
  } catch (err) {
    auditCliAction(takeAction(), err instanceof MoveRefused ? `refused (${err.code}): ${err.message}` : `error: ${(err as Error).message}`, io);
    if (err instanceof CommanderError) {
      if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version' || err.exitCode === 0) return EXIT.done;
      if (err.code !== 'rebalancer.invalid') {
        // Commander has printed its own usage error already; a script still gets its JSON.
        if (argv.includes('--json')) io.out(JSON.stringify({ ok: false, code: 'bad_usage', message: err.message.replace(/^error: /, '') }) + '\n');
        return EXIT.usage;
      }
      return fail(EXIT.usage, 'bad_usage', err.message, `error: ${err.message}`);
    }
    if (err instanceof ConfigError) return fail(EXIT.usage, 'bad_config', err.message, `configuration error: ${err.message}`);
    if (err instanceof Unreachable) return fail(EXIT.unreachable, 'unreachable', err.message, `error: ${err.message}`);
    if (err instanceof MoveRefused) return fail(EXIT.refused, err.code, err.message, `refused (${err.code}): ${err.message}`);
    return fail(EXIT.refused, 'error', (err as Error).message, `error: ${(err as Error).message}`);
  }
}
