// bin/podwire.js for the benches: the same two lines, on the CLI compiled with the bench
// (dist-bench/lib), so a bench never measures a stale dist/.
import { main } from '../../lib/cli/main.js';

process.exitCode = await main(process.argv.slice(2));
