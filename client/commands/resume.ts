import type { Command } from 'commander';
import type { CommandDeps } from '../output';
import { registerPauseOrResume } from './pause';

export function register(program: Command, deps: CommandDeps): void {
  registerPauseOrResume(program, deps, false);
}
