"""Verifiers parity table: each classic environment of verifiers v0.1.9.post3 and v0.2.0, copied unchanged
(tests/fixtures/verifiers_envs/), under that version's own vf-eval and under `prime eval run` against the
same scripted policy server (tests/support/parity_server.py), and `prime env check`'s verdict.

    .venv/bin/python benchmarks/verifiers_parity.py [--env gsm8k ...] [--tag v0.2.0 ...] [-v]
    .venv/bin/python benchmarks/verifiers_parity.py --v1      # verifiers' v1 environments (a60a606) vs vf-eval 0.4.0

Prints one row per environment and version: the mean reward of each tool, whether every per-rollout
reward agrees (abs 1e-6), the check's exit code and problems. -v prints each difference and the tail of
a failing command. The side venvs are made on first use (benchmarks/.venv-verifiers-<version>).
The test is tests/integration/test_verifiers_parity.py.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.parity_server import parity_reply  # noqa: E402
from tests.support.scripted_server import ScriptedOpenAIServer  # noqa: E402
from tests.support.verifiers_parity import (  # noqa: E402
    CASES,
    REFUSED,
    TAGS,
    V1_CASES,
    V1_COMMIT,
    Case,
    compare,
    false_problems,
    mean,
    prime_check,
    prime_eval,
    verifiers_venv,
    vf1_eval,
    vf_eval,
)


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", action="append", choices=sorted({*CASES, *V1_CASES}), help="only these environments")
    parser.add_argument("--tag", action="append", choices=TAGS, help="only these verifiers versions")
    parser.add_argument("-v", "--verbose", action="store_true")
    parser.add_argument("--v1", action="store_true", help="verifiers' v1 environments at a60a606 against vf-eval 0.4.0")
    args = parser.parse_args(argv)
    if args.v1:
        return v1_table(args.env)
    for tag in args.tag or TAGS:
        start = time.perf_counter()
        verifiers_venv(tag)
        print(f"venv for verifiers {tag}: ready in {time.perf_counter() - start:.0f} s", flush=True)
    header = f"{'environment':22} {'verifiers':12} {'prime':>6} {'vf-eval':>7} {'rollouts':>8}  {'parity':8} check"
    print(header)
    failed = 0
    with ScriptedOpenAIServer(parity_reply) as server, tempfile.TemporaryDirectory() as tmp:
        for tag in args.tag or TAGS:
            for name in args.env or sorted(CASES):
                case, root = CASES[name], Path(tmp) / tag / name
                for sub in ("vf", "prime", "check"):
                    (root / sub).mkdir(parents=True)
                vf = vf_eval(tag, case, root / "vf", server.url)
                prime = prime_eval(tag, case, root / "prime", server.url)
                check = prime_check(tag, case, root / "check", server.url)
                diffs = compare(vf.rewards, prime.rewards) if vf.rewards else ["vf-eval saved no rewards"]
                if not prime.rewards:
                    diffs.append("prime saved no rewards")
                false = false_problems(name, check.problems)
                if name in REFUSED and prime.returncode == 2 and REFUSED[name] in prime.output:
                    parity, verdict, diffs = "refused", f"exit {check.returncode}: {REFUSED[name]} (by design)", []
                elif check.report is None:
                    parity, verdict = "", f"exit {check.returncode}: {check.output.strip().splitlines()[-1][:160]}"
                else:
                    verdict = "ok" if check.returncode == 0 and not check.problems else (
                        f"exit {check.returncode}: " + (f"{len(false)} FALSE: " + "; ".join(false) if false else
                                                        f"{len(check.problems)} true problem(s)"))
                    parity = ""
                parity = parity or ("equal" if not diffs else f"{len(diffs)} diff")
                failed += bool(false)
                failed += bool(diffs)
                print(f"{name:22} {tag:12} {fmt(mean(prime.rewards)):>6} {fmt(mean(vf.rewards)):>7} "
                      f"{len(vf.rewards):>8}  {parity:8} {verdict}", flush=True)
                if args.verbose and diffs:
                    for line in diffs[:10]:
                        print(f"    {line}")
                    for label, run in (("vf-eval", vf), ("prime", prime)):
                        if run.returncode != 0 or not run.rewards:
                            print(f"    {label} exit {run.returncode}:\n" + "\n".join(
                                f"      {x}" for x in run.tail(12).splitlines()))
    return 1 if failed else 0


def v1_table(only: list[str] | None) -> int:
    """One row per v1 environment: prime's and vf-eval 0.4.0's mean reward and whether every task's rewards agree."""
    print(f"{'environment':18} {'prime':>8} {'vf-eval':>8} {'rollouts':>8}  parity")
    failed = 0
    with ScriptedOpenAIServer(parity_reply) as server, tempfile.TemporaryDirectory() as tmp:
        for name in only or sorted(V1_CASES):
            case = V1_CASES[name]
            vf = vf1_eval(case, Path(tmp) / f"{name}-vf", server.url)
            prime = prime_eval(V1_COMMIT, Case(name, n=case.n, r=case.r), Path(tmp) / f"{name}-prime", server.url)
            if prime.returncode == 2:
                parity = "prime refuses: " + prime.tail(1).split(": ", 2)[-1][:100]
            else:
                same = sorted((k[0], round(v, 6)) for k, v in prime.rewards.items()) == \
                    sorted((k[0], round(v, 6)) for k, v in vf.rewards.items())
                parity = "equal" if same and vf.all_ok else "DIFFER"
                failed += parity != "equal"
            print(f"{name:18} {fmt(mean(prime.rewards)):>8} {fmt(mean(vf.rewards)):>8} {len(vf.rewards):>8}  {parity}",
                  flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
