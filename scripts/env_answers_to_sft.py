"""Write an SFT data file (OpenAI chat fine-tuning rows) from an environment's own answers.

    python scripts/env_answers_to_sft.py reverse-text --args '{"plain_text": true}' -n 500 -o data.jsonl

Each row is the prompt the environment builds (its system prompt and few-shot turns) followed by the row's
`answer` as the assistant's reply. The few-shot assistant turns get `"weight": 0` (OpenAI's marker for a turn
not to train on), so the loss is taken on the answer alone. Only for environments whose `answer` is the reply
itself (reverse-text with plain_text: the reversal), not a reference the reply is scored against.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def sft_rows(env_id: str, env_args: dict, split: str, count: int | None) -> list[dict]:
    import prime_cli.envs as vf

    env = vf.load_environment(env_id, **env_args)
    rows = env.get_dataset() if split == "train" else env.get_eval_dataset()
    out = []
    for row in list(rows)[:count]:
        prompt = [dict(m, weight=0) if m.get("role") == "assistant" else dict(m) for m in row["prompt"]]
        out.append({"messages": prompt + [{"role": "assistant", "content": row["answer"]}]})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("env_id")
    parser.add_argument("--args", default="{}", help="load_environment arguments as JSON")
    parser.add_argument("--split", choices=("train", "eval"), default="train")
    parser.add_argument("-n", "--num-examples", type=int, default=None, help="the first N rows (default: all)")
    parser.add_argument("-o", "--output", type=Path, required=True)
    args = parser.parse_args(argv)
    rows = sft_rows(args.env_id, json.loads(args.args), args.split, args.num_examples)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text("".join(json.dumps(row) + "\n" for row in rows))
    print(f"wrote {len(rows)} rows to {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
