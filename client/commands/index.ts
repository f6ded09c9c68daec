/**
 * The registry: every `rebalancer` command, one module each.
 *
 * How to add a command:
 * 1. Create `client/commands/<name>.ts` exporting `register(program: Command, deps: CommandDeps): void`.
 * 2. In it, `defineCommand(program, '<name>', { description, examples, action? })` from ../output: it adds `--json`
 *    and, for an action (anything that changes the cluster), `--reason <text>`, and puts the examples in --help.
 *    Add the arguments, then `.action(...)`: check arguments with `parseId`/`positiveInt`/`usageError` (exit 2),
 *    pass the reason through `auditedReason`, talk to servers inside `withConnection(deps, ...)`, print with
 *    `print` (one JSON line with --json) and follow a started workflow with `followMove` for `--wait`.
 * 3. Refuse with `MoveRefused` from ../moves (exit 1, `{ ok: false, code, message }` with --json); a server that does
 *    not answer throws `Unreachable` (exit 3); cli.ts maps both. Set `deps.result.exitCode = EXIT.refused` when the
 *    command ran but did not succeed.
 * 4. Add one line to COMMANDS below (the order is the order in `rebalancer --help`).
 */
import type { Command } from 'commander';
import type { CommandDeps } from '../output';
import * as approve from './approve';
import * as audit from './audit';
import * as cancel from './cancel';
import * as drain from './drain';
import * as exclude from './exclude';
import * as grow from './grow';
import * as handoff from './handoff';
import * as move from './move';
import * as moves from './moves';
import * as nodes from './nodes';
import * as pause from './pause';
import * as pin from './pin';
import * as plan from './plan';
import * as replace from './replace';
import * as resume from './resume';
import * as show from './show';
import * as status from './status';
import * as undrain from './undrain';

export type Register = (program: Command, deps: CommandDeps) => void;

export const COMMANDS: { register: Register }[] = [move, handoff, grow, replace, drain, undrain, nodes, moves, show, cancel, status, pause, resume, pin, exclude, plan, approve, audit];
