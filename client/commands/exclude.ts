import type { Command } from 'commander';
import type { CommandDeps } from '../output';
import { registerHold } from './pin';

export function register(program: Command, deps: CommandDeps): void {
  registerHold(program, deps, 'exclude');
  registerHold(program, deps, 'include');
}
