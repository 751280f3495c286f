// The native binding as the library uses it: loaded on first use, given NetError (the class the
// addon throws) once, and refusing non-Linux platforms with a NetError ENOSYS. lib/native.ts is
// only the binding's shape and loader; this is the one place that initialises it.
import { loadBinding, type NativeBinding } from '../native.js';
import { NetError } from './errors.js';

let ready: NativeBinding | undefined;

/** The native binding, loaded and initialised on first use. */
export function native(): NativeBinding {
  if (!ready) {
    const b = loadBinding();
    if (!b.platformSupported) {
      throw new NetError(`podwire needs Linux (this is ${process.platform})`, { errno: 38, op: 'load', code: 'ENOSYS' });
    }
    b.init({ NetError });
    ready = b;
  }
  return ready;
}
