/** A benchmark's numeric option (`--name N`), or `fallback` when absent; anything but a positive number is refused. */
export function option(args: string[], name: string, fallback: number): number {
  const i = args.indexOf(name);
  const v = i >= 0 ? Number(args[i + 1]) : fallback;
  if (!Number.isFinite(v) || v <= 0) throw new Error(`invalid ${name} "${args[i + 1]}": expected a positive number`);
  return v;
}
