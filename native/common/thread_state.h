// Whether the calling thread is still fit to run more work: a thread whose
// network namespace could not be switched back is "poisoned" and must end.
// Per thread (thread_local), so nothing is shared between envs or Workers.
#pragma once

namespace podwire {

inline bool& ThreadPoisoned() {
  thread_local bool poisoned = false;
  return poisoned;
}

}  // namespace podwire
