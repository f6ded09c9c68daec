/** `npm run temporal:ensure`: build or find the Temporal CLI now and print its path. */
import { ensureTemporalCli } from './temporal-cli';

if (process.env.TEMPORAL_ADDRESS) {
  console.log(`TEMPORAL_ADDRESS is set (${process.env.TEMPORAL_ADDRESS}): no local Temporal CLI needed`);
} else {
  try {
    console.log(await ensureTemporalCli());
  } catch (err) {
    console.error((err as Error).message);
    process.exit(1);
  }
}
