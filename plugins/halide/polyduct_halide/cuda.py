"""Running Halide's CUDA runtime inside torch's CUDA context, on torch's current stream.

Halide's CUDA runtime creates a CUcontext of its own by default, in which torch's allocations
are not valid. The runtime library of a CUDA target is therefore linked with `GLUE` below, and
`install` points the runtime's context and stream hooks (`halide_set_cuda_acquire_context`,
`halide_set_cuda_release_context`, `halide_set_cuda_get_stream`, HalideRuntimeCuda.h) at it:

* the context is the calling thread's current one (`cuCtxGetCurrent`), which is torch's primary
  context of the device once torch has used it on the thread; with none current, the device's
  primary context (`cuDevicePrimaryCtxRetain`, once per device) - torch allocates in it too;
* the stream is the one `set_stream` recorded for the calling thread just before the kernel call:
  torch's current stream of the tensors' device, so kernels are ordered with torch's work.

libcuda is opened with `dlopen("libcuda.so.1")` at first use: nothing links against it, and
building a CUDA runtime needs no GPU and no CUDA toolkit.
"""

from __future__ import annotations

import ctypes
from typing import Any, Final

import torch

from polyduct import state

GLUE: Final = r"""
#include <dlfcn.h>
#include <stdbool.h>
#include <stddef.h>

typedef int (*ctx_get_t)(void **);
typedef int (*device_get_t)(int *, int);
typedef int (*primary_retain_t)(void **, int);

static ctx_get_t ctx_get;
static device_get_t device_get;
static primary_retain_t primary_retain;
static void *primary[64];
static __thread void *stream;
static __thread int device;

static int load(void) {
    if (ctx_get != NULL) return 0;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (lib == NULL) return -1;
    device_get = (device_get_t)dlsym(lib, "cuDeviceGet");
    primary_retain = (primary_retain_t)dlsym(lib, "cuDevicePrimaryCtxRetain");
    ctx_get = (ctx_get_t)dlsym(lib, "cuCtxGetCurrent");
    return ctx_get != NULL && device_get != NULL && primary_retain != NULL ? 0 : -1;
}

void polyduct_cuda_set_stream(int dev, void *s) {
    device = dev;
    stream = s;
}

int polyduct_cuda_acquire_context(void *user_context, void **ctx, bool create) {
    (void)user_context;
    (void)create;
    if (load() != 0) return -1;
    *ctx = NULL;
    if (ctx_get(ctx) != 0) return -1;
    if (*ctx != NULL) return 0;
    if (device < 0 || device >= 64) return -1;
    if (primary[device] == NULL) {
        int handle = 0;
        if (device_get(&handle, device) != 0) return -1;
        if (primary_retain(&primary[device], handle) != 0) return -1;
    }
    *ctx = primary[device];
    return 0;
}

int polyduct_cuda_release_context(void *user_context) {
    (void)user_context;
    return 0;
}

int polyduct_cuda_get_stream(void *user_context, void *ctx, void **out) {
    (void)user_context;
    (void)ctx;
    *out = stream;
    return 0;
}
"""

DEVICE_DIRTY: Final = 2  # halide_buffer_flag_device_dirty
_HOOKS: Final = ("acquire_context", "release_context", "get_stream")


def install(lib: ctypes.CDLL) -> int:
    """Point `lib`'s (a CUDA runtime linked with GLUE) hooks at the glue; its device interface."""
    for hook in _HOOKS:
        setter = getattr(lib, f"halide_set_cuda_{hook}")
        setter.restype = ctypes.c_void_p
        setter.argtypes = [ctypes.c_void_p]
        setter(ctypes.cast(getattr(lib, f"polyduct_cuda_{hook}"), ctypes.c_void_p).value)
    lib.polyduct_cuda_set_stream.restype = None
    lib.polyduct_cuda_set_stream.argtypes = [ctypes.c_int, ctypes.c_void_p]
    lib.halide_cuda_device_interface.restype = ctypes.c_void_p
    return int(lib.halide_cuda_device_interface())


def set_stream(lib: ctypes.CDLL, device: torch.device) -> None:
    """Record torch's current stream of `device` for the calling thread's next kernel call."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    lib.polyduct_cuda_set_stream(index, torch.cuda.current_stream(index).cuda_stream)


_SCRATCH = state.Slot("polyduct_halide.scratch", dict[torch.device, torch.Tensor])


def scratch(device: torch.device) -> int:
    """Device memory standing in for empty tensors (never read or written)."""
    tensors = _SCRATCH.get()
    if device not in tensors:
        tensors[device] = torch.empty(8, dtype=torch.uint8, device=device)
    return int(tensors[device].data_ptr())


def device_of(tensors: Any) -> torch.device | None:
    """The CUDA device of the first CUDA tensor among `tensors`, if any."""
    return next((t.device for t in tensors if t.is_cuda), None)
