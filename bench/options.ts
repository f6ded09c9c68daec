/**
 * A benchmark's numeric option (`--name N`), or `fallback` when absent; anything but a positive number is refused
 * (0 too, unless `zeroSkips`: then 0 turns the part off).
 */
export function option(args: string[], name: string, fallback: number, zeroSkips = false): number {
  const i = args.indexOf(name);
  const v = i >= 0 ? Number(args[i + 1]) : fallback;
  if (!Number.isFinite(v) || v < 0 || (v === 0 && !zeroSkips)) throw new Error(`invalid ${name} "${args[i + 1]}": expected a positive number${zeroSkips ? ', or 0 to skip' : ''}`);
  return v;
}
