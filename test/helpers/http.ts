// One plain HTTP request to a test server on 127.0.0.1 (no keep-alive agent), body as text.
import { request as httpRequest } from 'node:http';
import { expect } from 'vitest';

export interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

export function httpGet(s: { host: string; port: number }, path: string, method = 'GET'): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: s.host, port: s.port, path, method, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

/** The monitor servers' method rule on `path`: other methods get 405 with `Allow: GET, HEAD`; HEAD gets `headStatus` and no body. */
export async function expectGetHeadOnly(s: { host: string; port: number }, path: string, headStatus: number): Promise<void> {
  for (const m of ['POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS']) {
    const r = await httpGet(s, path, m);
    expect(r.status, m).toBe(405);
    expect(r.headers.allow).toBe('GET, HEAD');
  }
  const head = await httpGet(s, path, 'HEAD');
  expect(head.status).toBe(headStatus);
  expect(head.body).toBe('');
}
