"""`python -m bench.opinfo --backend cpp`: the full OpInfo sweep (see polyduct.conformance.opinfo).

Results go to a JSON-lines file (one line per case, `--out`, default
bench/results/opinfo_<backend>.jsonl). A rerun resumes: finished cases are kept, and a case that was
started but never finished (the process died in it) is recorded as a crash. Run it in a loop to
survive crashes: `until python -m bench.opinfo --backend cpp; do :; done`. `--shard K/N` runs every Nth
case from the Kth into its own file, so N processes share the sweep; concatenated into one file,
a run without `--shard` finds every case done and prints the summary. Each case has a time
limit (`--timeout`, seconds); one that runs past it is a failure.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from collections import Counter
from pathlib import Path
from types import FrameType

from polyduct.conformance.opinfo import OpInfoCase, OpInfoResult, opinfo_cases, run_case

RESULTS = Path(__file__).with_name("results")


class _Timeout(Exception):
    pass


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise _Timeout


def _done(out: Path) -> tuple[dict[str, dict[str, str]], set[str]]:
    done: dict[str, dict[str, str]] = {}
    started: set[str] = set()
    if out.exists():
        for line in out.read_text().splitlines():
            row = json.loads(line)
            if row["status"] == "start":
                started.add(row["id"])
            else:
                done[row["id"]] = row
    return done, started - set(done)


def _run(case: OpInfoCase, backend: str, timeout: int) -> OpInfoResult:
    signal.alarm(timeout)
    try:
        return run_case(case, backend)
    except _Timeout:
        return OpInfoResult(case, "fail", f"timed out after {timeout} s")
    finally:
        signal.alarm(0)


def _first_line(detail: str) -> str:
    """The line naming the error (Dynamo's wrapper puts its own first)."""
    lines = [
        ln for ln in detail.splitlines() if ln.strip() and "backend='polyduct' raised" not in ln
    ]
    return (lines[0] if lines else "")[:200]


def _shard(text: str) -> tuple[int, int]:
    k, _, n = text.partition("/")
    if not (k.isdigit() and n.isdigit() and 1 <= int(k) <= int(n)):
        raise argparse.ArgumentTypeError(f"expected K/N with 1 <= K <= N, got {text!r}")
    return int(k), int(n)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--backend", required=True)
    parser.add_argument("--samples", type=int, default=2)
    parser.add_argument("--timeout", type=int, default=300)
    parser.add_argument("--only", default="", help="comma-separated OpInfo names")
    parser.add_argument("--decomposed", action="store_true", help="decomposed ops' OpInfos too")
    parser.add_argument("--shard", type=_shard, default=(1, 1), metavar="K/N",
                        help="every Nth case from the Kth (1-based): N processes share a sweep")
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    wide = "_decomposed" if args.decomposed else ""
    k, n_shards = args.shard
    part = f".{k}-of-{n_shards}" if n_shards > 1 else ""
    out = Path(args.out or RESULTS / f"opinfo_{args.backend}{wide}{part}.jsonl")
    out.parent.mkdir(parents=True, exist_ok=True)
    done, crashed = _done(out)
    signal.signal(signal.SIGALRM, _alarm)
    cases = opinfo_cases(args.samples, decomposed=args.decomposed)
    if args.only:
        cases = [c for c in cases if c.op in args.only.split(",")]
    cases = cases[k - 1::n_shards]
    with out.open("a") as log:
        for n, case in enumerate(cases):
            if case.id in done:
                continue
            if case.id in crashed:
                row = {"id": case.id, "status": "fail", "detail": "process died in this case"}
            else:
                log.write(json.dumps({"id": case.id, "status": "start"}) + "\n")
                log.flush()
                result = _run(case, args.backend, args.timeout)
                row = {"id": case.id, "status": result.status, "detail": result.detail}
            log.write(json.dumps(row) + "\n")
            log.flush()
            done[case.id] = row
            print(f"[{n + 1}/{len(cases)}] {case.id}: {row['status']}", flush=True)
    counts = Counter(done[c.id]["status"] for c in cases if c.id in done)
    ran = counts["pass"] + counts["fail"]
    print(f"{args.backend}: {counts['pass']}/{ran} pass, {counts['skip']} skipped (eager refuses)")
    for case in cases:
        if done.get(case.id, {}).get("status") == "fail":
            print(f"FAIL {case.id}: {_first_line(done[case.id]['detail'])}")
    return 0 if counts["fail"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
