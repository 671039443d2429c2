"""A campaign: graphs `start .. start+count` of a seed, spread over worker processes.

A worker that dies (a crash in compiled code) or runs past the time limit (a hang) costs the
graph it was running, recorded as `crash` or `timeout`, and is replaced; so is one that retired
after a graph because its device became unusable (a CUDA error). A worker lost before its program
exists failed in eager, which the generator runs on stand-in inputs: that graph is `upstream`,
and the runner does not run eager itself. Results stream to
`results.jsonl` in the output directory as they arrive, each line naming its campaign, so that a
campaign stopped part-way (a time limit, a crash of the runner) resumes where it stopped.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import TextIO

from polyduct.fuzz.generate import generate
from polyduct.fuzz.repro import render_generation, render_module, write_module
from polyduct.fuzz.worker import Config, Result, serve

FAILURES = ("mismatch", "crash", "timeout")
_DIED = "worker process died"
STATUSES = ("pass", *FAILURES, "known", "upstream", "invalid")


@dataclass
class _Slot:
    """One worker process and the graph it is running."""

    proc: BaseProcess
    conn: Connection
    index: int | None = None
    deadline: float = 0.0
    generated: bool = False  # the generator made the program: eager ran it on stand-ins


@dataclass
class Campaign:
    """How many graphs, how wide, and how long each may take."""

    config: Config
    count: int
    start: int = 0
    jobs: int = 1
    timeout_s: float = 300.0
    resume: bool = False  # skip the graphs `results.jsonl` already holds for this campaign
    results: list[Result] = field(default_factory=list)


def _campaign_key(config: Config) -> str:
    """What a logged result must match to count for a resumed campaign."""
    options = json.dumps(config.options, sort_keys=True)
    return f"{config.backend} seed {config.seed} on {config.device} options {options}"


def _logged(campaign: Campaign) -> list[Result]:
    """This campaign's results already in `results.jsonl` (the last one of each graph)."""
    path = campaign.config.out / "results.jsonl"
    if not path.exists():
        return []
    key, span = _campaign_key(campaign.config), range(campaign.start,
                                                       campaign.start + campaign.count)
    found: dict[int, Result] = {}
    names = set(Result.__dataclass_fields__)
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:  # a line cut short when the runner was killed
            continue
        if isinstance(record, dict) and record.get("campaign") == key and record.get("index") in span:
            found[record["index"]] = Result(**{k: v for k, v in record.items() if k in names})
    return [found[i] for i in sorted(found)]


def _spawn(config: Config) -> _Slot:
    ctx = mp.get_context("spawn")  # a fresh interpreter: no state forked from the parent
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=serve, args=(config, child), daemon=True)
    proc.start()
    child.close()
    return _Slot(proc, parent)


def _respawn(slot: _Slot, config: Config) -> _Slot:
    _stop(slot)
    return _spawn(config)


def _stop(slot: _Slot) -> None:
    slot.proc.kill()
    slot.proc.join()
    slot.conn.close()


def _progress(done: Counter[str], total: int, start: float, out: TextIO, resumed: int) -> None:
    n = sum(done.values())
    rate = (n - resumed) / max(time.monotonic() - start, 1e-9)
    parts = " ".join(f"{s} {done[s]}" for s in STATUSES if done[s])
    end = "\r" if out.isatty() else "\n"
    print(f"[{n:>{len(str(total))}}/{total}] {parts}  {rate:.2f} graphs/s", end=end, file=out,
          flush=True)


def run_campaign(campaign: Campaign, out: TextIO | None = None) -> list[Result]:
    """Run every graph of `campaign`, progress to `out` (standard error: the stream current at
    the call, not at import); return the results ordered by graph index."""
    out = sys.stderr if out is None else out
    c = campaign.config
    c.out.mkdir(parents=True, exist_ok=True)
    if campaign.resume:
        campaign.results.extend(_logged(campaign))
    skip = {r.index for r in campaign.results}
    pending = [i for i in range(campaign.start + campaign.count - 1, campaign.start - 1, -1)
               if i not in skip]
    slots = [_spawn(c) for _ in range(min(campaign.jobs, len(pending)))]
    done: Counter[str] = Counter(r.status for r in campaign.results)
    start = time.monotonic()
    every = max(1, campaign.count // 100)
    key = _campaign_key(c)
    _end_last_line(c.out / "results.jsonl")
    with open(c.out / "results.jsonl", "a") as log:
        while pending or any(s.index is not None for s in slots):
            for i, slot in enumerate(slots):
                if slot.index is None and pending and not slot.proc.is_alive():
                    slots[i] = slot = _respawn(slot, c)  # it retired: its device was unusable
                if slot.index is None and pending:
                    slot.index, slot.generated = pending.pop(), False
                    slot.deadline = time.monotonic() + campaign.timeout_s
                    slot.conn.send(slot.index)
            for i, slot in enumerate(slots):
                result = _poll(slot, campaign)
                if result is None:
                    continue
                if result.status == "timeout" or result.detail.startswith(_DIED):
                    slots[i] = _respawn(slot, c)
                    _write_lost(c, result, slot.generated)
                campaign.results.append(result)
                log.write(json.dumps({**asdict(result), "campaign": key}) + "\n")
                log.flush()
                done[result.status] += 1
                if out.isatty() or sum(done.values()) % every == 0:
                    _progress(done, campaign.count, start, out, len(skip))
            wait([s.conn for s in slots if s.index is not None] or [], timeout=0.5)
    for slot in slots:
        if slot.proc.is_alive():
            slot.conn.send(None)
        slot.proc.join(timeout=10)
        if slot.proc.is_alive():
            _stop(slot)
    if out.isatty():
        print(file=out)
    return sorted(campaign.results, key=lambda r: r.index)


def _end_last_line(path: Path) -> None:
    """End a line a killed runner cut short, so that the next result starts a line of its own."""
    if path.exists() and path.stat().st_size:
        with open(path, "rb+") as f:
            f.seek(-1, os.SEEK_END)
            if f.read(1) != b"\n":
                f.write(b"\n")


def _write_lost(config: Config, result: Result, generated: bool) -> None:
    """The reproducer of a graph whose worker died or hung (unshrunk, unless shrinking began).
    One lost before its program existed is eager's, which the generator runs: the runner does
    not run it again itself (it would crash or hang too), and the reproducer generates it."""
    if not generated:
        result.status = "upstream"
        result.detail = (f"eager, run by the generator on stand-in inputs, failed ({result.detail}):"
                         " torch's own bug")
        path = config.out / f"upstream_{config.backend}_s{config.seed}_g{result.index}.py"
        write_module(path, render_generation(config.seed, result.index, config.dtypes,
                                             config.known, result.detail))
        result.repro = str(path)
        return
    path = config.out / f"fail_{config.backend}_s{config.seed}_g{result.index}.py"
    result.repro = str(path)
    if path.exists():
        return
    program = generate(config.seed, result.index, config.dtypes, config.known)
    source = render_module(program, config.backend, result.index, config.options,
                           config.device, result.detail)
    write_module(path, source)


def _poll(slot: _Slot, campaign: Campaign) -> Result | None:
    """The finished graph of `slot`, if any: a result, a died worker, or a timeout."""
    if slot.index is None:
        return None
    index = slot.index
    try:
        while slot.conn.poll():
            kind, payload = slot.conn.recv()
            if kind == "generated":
                slot.generated = True
                continue
            if kind == "shrinking":  # the graph failed: shrinking gets its own time budget
                slot.deadline = time.monotonic() + campaign.timeout_s + campaign.config.shrink_s
                continue
            slot.index = None
            assert isinstance(payload, Result)
            return payload
    except (EOFError, OSError):
        pass
    if not slot.proc.is_alive():
        slot.index = None
        code = slot.proc.exitcode
        return Result(index, "crash", f"{_DIED} (exit code {code})")
    if time.monotonic() > slot.deadline:
        slot.index = None
        return Result(index, "timeout", f"no result within {campaign.timeout_s:g} s")
    return None


def summary_table(results: list[Result], backend: str, seconds: float) -> str:
    """The end-of-campaign table: counts per status, then one line per failure."""
    counts = Counter(r.status for r in results)
    lines = [f"polyduct fuzz: kernels={backend!r}, {len(results)} graphs in {seconds:.0f} s", "",
             "| status | graphs |", "|---|---|"]
    lines += [f"| {s} | {counts[s]} |" for s in STATUSES]
    failed = [r for r in results if r.status in FAILURES]
    if failed:
        lines += ["", "| graph | status | stmts | reproducer | detail |", "|---|---|---|---|---|"]
        for r in failed:
            first = (r.detail.strip().splitlines() or [""])[0][:100].replace("|", "\\|")
            lines.append(f"| {r.index} | {r.status} | {r.stmts} | {r.repro} | {first} |")
    upstream = [r for r in results if r.status == "upstream"]
    if upstream:
        lines += ["", "torch's own bugs (its own compilers fail the same way; not counted):"]
        lines += [f"- graph {r.index}: {(r.detail.strip().splitlines() or [''])[0][:100]}"
                  for r in upstream]
    known = sorted({t for r in results if r.status == "known" for t in r.tags})
    if known:
        lines += ["", f"known bugs (not counted as failures): {', '.join(known)}"]
    return "\n".join(lines)
