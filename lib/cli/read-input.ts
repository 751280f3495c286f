// Every input a command reads (nft scripts, ipset entry files, stdin) goes
// through here: read incrementally and stop at a fixed cap, so `/dev/zero` or
// an endless pipe ends with a usage error instead of unbounded memory.
import { createReadStream } from 'node:fs';
import { UsageError } from './args.js';

/** The most a command reads from one file or from stdin: 16 MiB. */
export const MAX_INPUT_BYTES = 16 * 1024 * 1024;

/** Input over the cap (exit 2; the usage text is not repeated). */
export class InputTooLargeError extends UsageError {
  static {
    Object.defineProperty(this.prototype, 'name', { value: 'InputTooLargeError', enumerable: false });
  }
  override readonly showUsage = false;
  readonly code = 'ERR_INPUT_TOO_LARGE';
}

export interface ReadInputOptions {
  /** What the input is, for the message (e.g. "nft script"). */
  what: string;
  /** Cap in bytes (default MAX_INPUT_BYTES). */
  limit?: number;
  /** The stream `-` stands for (default process.stdin). */
  stdin?: NodeJS.ReadableStream;
}

const mib = (n: number) => (n % (1024 * 1024) === 0 ? `${n / (1024 * 1024)} MiB` : `${n} bytes`);

/**
 * Reads FILE, or stdin for `-`, as UTF-8, chunk by chunk; more than `limit`
 * bytes → InputTooLargeError as soon as the cap is crossed (the rest is never
 * read). I/O errors (ENOENT, EISDIR, ...) propagate with their code.
 */
export async function readInput(source: string, opts: ReadInputOptions): Promise<string> {
  const limit = opts.limit ?? MAX_INPUT_BYTES;
  const fromStdin = source === '-';
  const stream: NodeJS.ReadableStream = fromStdin ? (opts.stdin ?? process.stdin) : createReadStream(source, { highWaterMark: 64 * 1024 });
  const chunks: Buffer[] = [];
  let total = 0;
  try {
    for await (const chunk of stream) {
      const buf = typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer);
      total += buf.length;
      if (total > limit) {
        throw new InputTooLargeError(`${opts.what} ${fromStdin ? 'on stdin' : source} is larger than ${mib(limit)} (the input limit); stopped reading`);
      }
      chunks.push(buf);
    }
  } finally {
    // Leaving the loop early destroys a file stream; stdin is let go too, so an endless writer gets EPIPE.
    if (fromStdin && total > limit) (stream as NodeJS.ReadableStream & { destroy?: () => void }).destroy?.();
  }
  return Buffer.concat(chunks, total > limit ? undefined : total).toString('utf8');
}
