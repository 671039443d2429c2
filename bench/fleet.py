"""A fleet compiling the same models against one Redis: compiles per process, wall time per process.

    python -m bench.fleet [--procs 4] [--models gpt2,bert,llama] [--out bench/results/fleet.json]

Runs four scenarios, each with `--procs` processes started together, each with its own empty
local cache (cold): `local` (no remote cache), `remote` (one fresh redis-server shared by all),
`remote-warm` (a second fleet against the store the first one filled) and `remote-killed` (a fresh
server, killed once it holds `--kill-at` entries, mid-run). Each
process compiles every model (transformers models built from small configs with random weights,
nothing downloaded) with `torch.compile(backend="polyduct")`, runs it once and checks it against
eager. Needs `pip install transformers` and `redis-server` (bash scripts/redis.sh install).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from bench.redis_server import RedisServer

MODELS = ("gpt2", "bert", "llama")


def _model(name: str) -> tuple[torch.nn.Module, dict[str, torch.Tensor]]:
    """The model suite's `name` (small config, random weights) and one call's inputs (24 tokens)."""
    from bench.models_zoo import hf_specs

    specs = {s.name: s for s in hf_specs() if s.name in MODELS}
    if name not in specs:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(MODELS)}")
    spec = specs[name]
    inputs = spec.inputs(torch.Generator().manual_seed(1), 24, "cpu")
    return spec.build().eval(), inputs  # type: ignore[return-value]


def worker(models: list[str], out: Path) -> None:
    """One process of the fleet: compile and run each model; write counts and checks to `out`."""
    from polyduct import remote_cache
    from polyduct.cache import default_root

    start = time.perf_counter()
    errors: dict[str, float] = {}
    for name in models:
        torch.manual_seed(0)
        model, inputs = _model(name)
        with torch.no_grad():
            want = model(**inputs).logits
            got = torch.compile(model, backend="polyduct")(**inputs).logits
        errors[name] = float((got - want).abs().max())
    root = default_root()
    entries = {
        ns.name: sum(1 for e in ns.iterdir() if not e.name.startswith("."))
        for ns in root.iterdir()
        if ns.is_dir() and not ns.name.endswith("failed")
    }
    remote = remote_cache.default_remote()
    pulled = dict(remote.pulled_from) if remote is not None else {}
    cpu = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    result = {
        "seconds": time.perf_counter() - start,
        "cpu_s": sum(u.ru_utime + u.ru_stime for u in cpu),
        "max_abs_error": errors,
        "built": {ns: n - pulled.get(ns, 0) for ns, n in sorted(entries.items())},
        "pulled": pulled,
        "waited": remote.waited if remote is not None else 0,
        "remote_disabled": remote.disabled if remote is not None else None,
    }
    out.write_text(json.dumps(result, indent=1))


def _run_fleet(
    procs: int, models: list[str], work: Path, url: str | None, kill: Any = None
) -> list[dict[str, Any]]:
    """Start `procs` workers together; `kill` = (server, seconds) kills the store mid-run."""
    env = {k: v for k, v in os.environ.items() if k != "POLYDUCT_REMOTE_CACHE"}
    env["OMP_NUM_THREADS"] = "1"
    if url is not None:
        env["POLYDUCT_REMOTE_CACHE"] = url
    running = []
    for i in range(procs):
        run_env = {**env, "POLYDUCT_CACHE_DIR": str(work / f"cache{i}")}
        cmd = [
            sys.executable,
            "-m",
            "bench.fleet",
            "--worker",
            str(work / f"out{i}.json"),
            "--models",
            ",".join(models),
        ]
        running.append(
            (
                time.perf_counter(),
                subprocess.Popen(cmd, env=run_env, stderr=subprocess.PIPE, text=True),
            )
        )
    if kill is not None:
        _kill_when_filled(kill[0], kill[1], [proc for _, proc in running])
    results = []
    for i, (started, proc) in enumerate(running):
        _, err = proc.communicate()
        wall = time.perf_counter() - started
        if proc.returncode != 0:
            raise RuntimeError(f"fleet process {i} failed:\n{err[-3000:]}")
        result = json.loads((work / f"out{i}.json").read_text())
        result["wall_s"] = wall
        result["remote_warnings"] = err.count("remote cache")
        results.append(result)
    return results


def _kill_when_filled(server: RedisServer, entries: int, procs: list[Any]) -> None:
    """Kill the store once it holds `entries` entries (or all processes ended)."""
    import redis

    client = redis.Redis.from_url(server.url)
    while any(p.poll() is None for p in procs):
        if len(client.keys("polyduct:*")) >= entries:
            break
        time.sleep(0.1)
    server.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--procs", type=int, default=4)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--kill-at", type=int, default=3, help="entries in the store")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--worker", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    models = args.models.split(",")
    if args.worker is not None:
        worker(models, args.worker)
        return
    report: dict[str, Any] = {"procs": args.procs, "models": models}
    with tempfile.TemporaryDirectory(prefix="polyduct-fleet-") as tmp:
        work = Path(tmp)
        shared = RedisServer(work)
        try:
            for scenario in ("local", "remote", "remote-warm", "remote-killed"):
                (work / scenario).mkdir()
                server = RedisServer(work / scenario) if scenario == "remote-killed" else shared
                kill = (server, args.kill_at) if scenario == "remote-killed" else None
                url = None if scenario == "local" else server.url
                report[scenario] = _run_fleet(args.procs, models, work / scenario, url, kill)
                _print(scenario, report[scenario])
        finally:
            shared.stop()
    if args.out is not None:
        args.out.write_text(json.dumps(report, indent=1) + "\n")


def _print(scenario: str, results: list[dict[str, Any]]) -> None:
    print(f"== {scenario}")
    for i, r in enumerate(results):
        built = sum(r["built"].values())
        pulled = sum(r["pulled"].values())
        err = max(r["max_abs_error"].values())
        print(
            f"  process {i}: built {built:3d} ({r['built'].get('cpp', 0)} C++ libraries), "
            f"pulled {pulled:3d} (waited {r['waited']}), wall {r['wall_s']:6.1f} s, "
            f"CPU {r['cpu_s']:5.1f} s, max |err| {err:.1e}, remote warnings {r['remote_warnings']}"
        )


if __name__ == "__main__":
    main()
