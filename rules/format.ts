/** Plain words for numbers an operator reads in blocking reasons, the CLI and the dashboard. */
export function formatBytes(n: number | null | undefined): string {
  if (n === null || n === undefined) return 'unknown bytes';
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v.toFixed(1)} ${units[i]}`;
}
