#!/usr/bin/env node
// Entry point of the `podwire` command; the CLI itself is compiled from lib/cli.
import { main } from '../dist/cli/main.js';

process.exitCode = await main(process.argv.slice(2));
