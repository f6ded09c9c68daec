/** The p-th percentile (nearest rank) of values; NaN for none. */
export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;
}

/** x rounded to d decimals, as the benches print figures. */
export const round = (x: number, d = 3): number => Number(x.toFixed(d));
