// The error a promise must reject with, checked to be an instance of `type`
// (the test fails when the promise resolves or rejects with something else).
import { expect } from 'vitest';

export async function rejection<E extends Error>(p: Promise<unknown>, type: abstract new (...args: never[]) => E): Promise<E> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(type);
    return err as E;
  }
  throw new Error(`expected a rejection with ${type.name}`);
}
