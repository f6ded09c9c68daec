import { runCli } from './cli';

const code = await runCli(process.argv.slice(2));
// A pipe takes 64 KiB at a time: the rest of a long --json output is still queued, and exiting at once would cut it off.
process.stdout.write('', () => process.exit(code));
