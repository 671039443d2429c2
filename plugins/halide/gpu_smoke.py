"""Smoke test of the Halide backend on a CUDA device (run by gpu_job.sh; needs a GPU).

Each check prints one line: a pointwise kernel on a strided view, a row reduction, a scan,
torch.compile end to end, a kernel on a side stream, and each GPU schedule.
"""

from __future__ import annotations

import sys
import time
import traceback
from collections.abc import Callable

import torch


def _check(name: str, fn: Callable[[], None]) -> bool:
    start = time.perf_counter()
    try:
        fn()
    except Exception:  # noqa: BLE001  (report and go on: the job wants every line)
        print(f"FAIL {name}\n{traceback.format_exc()}")
        return False
    print(f"ok   {name} ({time.perf_counter() - start:.2f}s)")
    return True


def _compiled(
    fn: Callable[..., torch.Tensor], schedule: str = "default"
) -> Callable[..., torch.Tensor]:
    options = {"kernels": "halide", "kernel_options": {"halide_schedule": schedule}}
    return torch.compile(fn, backend="polyduct", options=options)


def pointwise() -> None:
    a = torch.randn(300, 70, device="cuda").t()  # strided
    out = _compiled(lambda x: torch.sigmoid(x * x) + 1)(a)
    torch.testing.assert_close(out, torch.sigmoid(a * a) + 1)


def reduction() -> None:
    a = torch.randn(513, 1001, device="cuda")
    got = _compiled(lambda x: (x.sum(1), x.amax(0), x.argmax(1)))(a)
    torch.testing.assert_close(got[0], a.sum(1), rtol=1e-4, atol=1e-3)
    torch.testing.assert_close(got[1], a.amax(0))
    torch.testing.assert_close(got[2], a.argmax(1))


def scan_and_sort() -> None:
    a = torch.randn(37, 129, device="cuda")
    got = _compiled(lambda x: (x.cumsum(1), torch.sort(x, 1)[0]))(a)
    torch.testing.assert_close(got[0], a.cumsum(1), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(got[1], torch.sort(a, 1)[0])


def side_stream() -> None:
    fn = _compiled(lambda x: x * 2 + 1)
    stream = torch.cuda.Stream()
    a = torch.randn(1 << 20, device="cuda")
    fn(a)  # compiled on the default stream
    with torch.cuda.stream(stream):
        b = a * 3
        out = fn(b)
    stream.synchronize()
    torch.testing.assert_close(out, a * 6 + 1)


def schedule(name: str) -> Callable[[], None]:
    def run() -> None:
        a = torch.randn(2048, 512, device="cuda")
        out = _compiled(lambda x: torch.exp(x) * 2 + x.sum(1, keepdim=True), name)(a)
        torch.testing.assert_close(
            out, torch.exp(a) * 2 + a.sum(1, keepdim=True), rtol=1e-4, atol=1e-3
        )

    return run


def main() -> int:
    print(torch.__version__, torch.cuda.get_device_name(), torch.cuda.get_device_capability())
    checks = {"pointwise": pointwise, "reduction": reduction, "scan_and_sort": scan_and_sort}
    checks["side_stream"] = side_stream
    for name in ("Anderson2021", "Li2018", "Mullapudi2016"):
        checks[f"schedule {name}"] = schedule(name)
    results = [_check(name, fn) for name, fn in checks.items()]
    print(f"{sum(results)}/{len(results)} smoke checks passed")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
