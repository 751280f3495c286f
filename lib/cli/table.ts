// Plain-text tables for terminal output: columns padded to their widest cell.
export function table(headers: string[], rows: Array<Array<string | number | undefined>>): string {
  const cells = rows.map((r) => r.map((c) => (c === undefined ? '' : String(c))));
  const widths = headers.map((h, i) => Math.max(h.length, ...cells.map((r) => (r[i] ?? '').length)));
  const line = (r: string[]) => r.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd();
  return [line(headers), line(widths.map((w) => '-'.repeat(w))), ...cells.map(line)].join('\n');
}
