/**
 * Preloaded (`node --import`) into a child process whose stdin is a pipe from its parent and never written:
 * when the pipe closes, the parent is gone (even by SIGKILL), so the child sends itself SIGTERM and stops
 * through its own handler instead of running on as an orphan that holds its port and data directory.
 */
process.stdin.once('end', () => process.kill(process.pid, 'SIGTERM'));
process.stdin.resume();
