// JSON text exactly as Go's encoding/json MarshalIndent(v, "", "  ") writes it, which is what
// Istio's installer puts on the node: a Go map's keys sorted by their UTF-8 bytes, a struct's
// fields in declaration order (`Ordered` here), `<`, `>`, `&`, U+2028 and U+2029 escaped as
// \u003c..., other control characters as \b \f \n \r \t or \u00XX, numbers as Go formats a
// float64 (the type every JSON number decodes to in a map[string]any), `{}` and `[]` when empty.

/** An object written with its keys in this order (a Go struct), not sorted (a Go map). */
export class Ordered {
  constructor(readonly entries: ReadonlyArray<readonly [string, unknown]>) {}
}

/** Go's MarshalIndent(v, "", "  "), without a trailing newline. */
export function marshalIndent(value: unknown): string {
  const out: string[] = [];
  write(value, '', out);
  return out.join('');
}

/** Compares two keys the way Go's sort.Strings does: by their UTF-8 bytes. */
export function compareUtf8(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

function write(v: unknown, indent: string, out: string[]): void {
  if (v === null || v === undefined) {
    out.push('null');
  } else if (typeof v === 'string') {
    out.push(goString(v));
  } else if (typeof v === 'number') {
    out.push(goFloat(v));
  } else if (typeof v === 'boolean') {
    out.push(v ? 'true' : 'false');
  } else if (Array.isArray(v)) {
    if (v.length === 0) {
      out.push('[]');
      return;
    }
    const inner = `${indent}  `;
    out.push('[\n');
    v.forEach((item, i) => {
      out.push(inner);
      write(item, inner, out);
      out.push(i < v.length - 1 ? ',\n' : '\n');
    });
    out.push(`${indent}]`);
  } else if (typeof v === 'object') {
    const entries = v instanceof Ordered
      ? v.entries
      : Object.keys(v).sort(compareUtf8).map((k) => [k, (v as Record<string, unknown>)[k]] as const);
    if (entries.length === 0) {
      out.push('{}');
      return;
    }
    const inner = `${indent}  `;
    out.push('{\n');
    entries.forEach(([k, item], i) => {
      out.push(`${inner}${goString(k)}: `);
      write(item, inner, out);
      out.push(i < entries.length - 1 ? ',\n' : '\n');
    });
    out.push(`${indent}}`);
  } else {
    throw new TypeError(`cannot encode a ${typeof v} as JSON`);
  }
}

const HEX = '0123456789abcdef';

/** encoding/json's string encoder with HTML escaping (Marshal's default). */
export function goString(s: string): string {
  let out = '"';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) {
      if (c >= 0x20 && c !== 0x22 && c !== 0x5c && c !== 0x3c && c !== 0x3e && c !== 0x26) out += s[i];
      else if (c === 0x22) out += '\\"';
      else if (c === 0x5c) out += '\\\\';
      else if (c === 0x08) out += '\\b';
      else if (c === 0x0c) out += '\\f';
      else if (c === 0x0a) out += '\\n';
      else if (c === 0x0d) out += '\\r';
      else if (c === 0x09) out += '\\t';
      else out += `\\u00${HEX[c >> 4]}${HEX[c & 0xf]}`;
    } else if (c === 0x2028 || c === 0x2029) {
      out += `\\u${c.toString(16)}`;
    } else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && s.charCodeAt(i + 1) >= 0xdc00 && s.charCodeAt(i + 1) <= 0xdfff) {
      out += s[i]! + s[i + 1]!;
      i++;
    } else if (c >= 0xd800 && c <= 0xdfff) {
      // A lone surrogate (only JSON "\ud800" escapes make one): Go's decoder turns it into U+FFFD.
      out += '\ufffd';
    } else {
      out += s[i];
    }
  }
  return `${out}"`;
}

/** strconv.AppendFloat as encoding/json's float64 encoder calls it. */
function goFloat(n: number): string {
  if (!Number.isFinite(n)) throw new RangeError(`JSON has no ${n}`);
  if (Object.is(n, -0)) return '-0';
  // JavaScript's Number#toString is the shortest round-trip form too, and switches to an
  // exponent at the same points (< 1e-6, >= 1e21); Go writes the exponent as e-7 / e+21 as well.
  return String(n);
}
