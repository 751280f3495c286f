// /metrics read by an independent parser: the official Prometheus Python
// client's text parser (Debian's python3-prometheus-client), so a format
// error of ours is not hidden by a parser written to match it. Debian's
// interpreter by path: the package installs into its dist-packages.
import { execFileSync } from 'node:child_process';

export interface Sample {
  labels: Record<string, string>;
  value: number;
}

const SCRIPT = `
import json, math, sys
from prometheus_client.parser import text_string_to_metric_families
out = []
for fam in text_string_to_metric_families(sys.stdin.read()):
    for s in fam.samples:
        v = s.value if math.isfinite(s.value) else str(s.value)  # JSON has no NaN/Inf: sent as text
        out.append({"family": fam.name, "type": fam.type, "name": s.name, "labels": s.labels, "value": v})
print(json.dumps(out))
`;

/** Sample name (`x_total`, `x_bucket`, `x_count`, gauges as named) → its samples. Throws on text the parser rejects. */
export function parsePrometheusText(text: string): Map<string, Sample[]> {
  const raw = execFileSync('/usr/bin/python3', ['-c', SCRIPT], { input: text, encoding: 'utf8', maxBuffer: 64 << 20 });
  const out = new Map<string, Sample[]>();
  const NON_FINITE: Record<string, number> = { nan: NaN, inf: Infinity, '-inf': -Infinity };
  for (const s of JSON.parse(raw) as Array<{ name: string; labels: Record<string, string>; value: number | string }>) {
    const list = out.get(s.name) ?? [];
    const value = typeof s.value === 'number' ? s.value : NON_FINITE[s.value];
    if (value === undefined) throw new Error(`unexpected sample value ${s.value} for ${s.name}`);
    list.push({ labels: s.labels, value });
    out.set(s.name, list);
  }
  return out;
}
