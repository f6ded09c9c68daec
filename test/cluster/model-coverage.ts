/** What the model sequences reached, counted by the driver and printed once per run. */
export interface Coverage {
  sequences: number;
  commands: number;
  movesStarted: number;
  movesCompleted: number;
  /** Moves the driver's ledger saw end: completed, undone by a swap back, or aborted (learner dropped). */
  movesEnded: number;
  swaps: number;
  /** Swaps back accepted: T down after the swap, R counting again. */
  swapBacks: number;
  removals: number;
  promotions: number;
  learnersDropped: number;
  handoffs: number;
  recoveries: number;
  diskLosses: number;
  /** Faults injected while a partition had a learner or a leaving replica. */
  faultsMidMove: number;
  /** Disk losses on a partition's R or T between its swap and its removal. */
  diskLossesAroundSwap: number;
  /** Moves the settle phase had to finish, and how long the slowest took as a share of its bound. */
  settled: number;
  lostForGood: number;
  worstBoundUse: number;
  breaches: number;
  livenessFailures: number;
}

export function emptyCoverage(): Coverage {
  return {
    sequences: 0,
    commands: 0,
    movesStarted: 0,
    movesCompleted: 0,
    movesEnded: 0,
    swaps: 0,
    swapBacks: 0,
    removals: 0,
    promotions: 0,
    learnersDropped: 0,
    handoffs: 0,
    recoveries: 0,
    diskLosses: 0,
    faultsMidMove: 0,
    diskLossesAroundSwap: 0,
    settled: 0,
    lostForGood: 0,
    worstBoundUse: 0,
    breaches: 0,
    livenessFailures: 0,
  };
}

export function formatCoverage(label: string, c: Coverage): string {
  return (
    `${label}: ${c.sequences} sequences (${c.commands} commands), moves started ${c.movesStarted}, completed ${c.movesCompleted}, ended ${c.movesEnded}, ` +
    `swaps ${c.swaps} (${c.swapBacks} swapped back), removals ${c.removals}, promotions ${c.promotions}, learners dropped ${c.learnersDropped}, handoffs ${c.handoffs}, ` +
    `recoveries activated ${c.recoveries}, disk losses ${c.diskLosses} (${c.diskLossesAroundSwap} between swap and removal), ` +
    `faults mid-move ${c.faultsMidMove}, settled after faults ${c.settled} (nodes lost for good ${c.lostForGood}, ` +
    `slowest ${Math.round(c.worstBoundUse * 100)}% of its bound), breaches ${c.breaches}, liveness failures ${c.livenessFailures}`
  );
}
