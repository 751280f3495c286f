// One plain HTTP/1.0 GET to an address inside a network namespace (the agent's /metrics on a
// node netns), and the sum/count pairs of a Prometheus histogram read from the answer.
import { connectTcp } from '../../lib/net/sock/connect.js';
import { Netns } from '../../lib/net/netns/netns.js';

/** The body of GET `path` from ip:port in the netns at `netnsPath` (at most 8 MiB, 5 s). */
export async function getInNetns(netnsPath: string, ip: string, port: number, path: string): Promise<string> {
  const ns = Netns.open(netnsPath);
  try {
    const sock = await connectTcp(ns, ip, port, { timeoutMs: 5000 });
    const text = await new Promise<string>((resolve, reject) => {
      let body = '';
      const timer = setTimeout(() => sock.destroy(new Error(`GET ${path}: no answer within 5 s`)), 5000);
      sock.setEncoding('utf8');
      sock.on('data', (d: string) => {
        body += d;
        if (body.length > 8 << 20) sock.destroy(new Error(`GET ${path}: answer over 8 MiB`));
      });
      sock.on('end', () => { clearTimeout(timer); resolve(body); });
      sock.on('error', (e) => { clearTimeout(timer); reject(e); });
      sock.write(`GET ${path} HTTP/1.0\r\nHost: ${ip}\r\n\r\n`);
    });
    const head = text.indexOf('\r\n\r\n');
    if (!/^HTTP\/1\.[01] 200 /.test(text) || head < 0) throw new Error(`GET ${path}: ${text.split('\r\n', 1)[0]}`);
    return text.slice(head + 4);
  } finally {
    ns.close();
  }
}

/** Σ of `<name>_sum` and of `<name>_count` over all label sets, from Prometheus text. */
export function histogramTotals(text: string, name: string): { sum: number; count: number } {
  let sum = 0, count = 0;
  for (const line of text.split('\n')) {
    const m = /^(\S+?)(?:\{[^}]*\})? (\S+)$/.exec(line);
    if (!m) continue;
    if (m[1] === `${name}_sum`) sum += Number(m[2]);
    else if (m[1] === `${name}_count`) count += Number(m[2]);
  }
  return { sum, count };
}
