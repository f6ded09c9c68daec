/** A small seeded PRNG (mulberry32): its whole state is one uint32, so it persists with the simulation. */
export class Prng {
  constructor(public state: number) {
    this.state = state >>> 0;
  }

  /** A uint32. */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  }

  hex(): string {
    return this.next().toString(16).padStart(8, '0');
  }
}
