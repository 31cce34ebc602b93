// The rank process's own lifetime, bound to the process that started it: a rank must never outlive mpirun, orted or
// slurmstepd (see worker/lifeline.ts for why and for the other layers).
#pragma once
#include <napi.h>

namespace addon {

// setParentDeathSignal(signal) -> parent pid: PR_SET_PDEATHSIG, so the kernel sends `signal` to this process the
// moment its parent exits, however it exits (SIGKILL included). Returns getppid() read after the setting, so the
// caller can tell whether the parent it meant to bind to was still there. Throws invalid_argument for a signal out
// of 1..64 and unsupported where prctl is not Linux's.
Napi::Value set_parent_death_signal(const Napi::CallbackInfo& info);

}  // namespace addon
