"""Setup leaves bytecode for what prime's everyday commands import (scripts/compile_startup.py says why)."""

import json
import os
import subprocess
import sys

PROBE = """
import importlib.util, json, site, sys
import prime_cli.cli.main, prime_cli.evals.api, prime_cli.gepa.api, prime_cli.clients.endpoints, openai
site_packages = site.getsitepackages()[0]
missing = []
for module in list(sys.modules.values()):
    source = getattr(module, "__file__", None) or ""
    if source.startswith(site_packages) and source.endswith(".py"):
        cached = importlib.util.cache_from_source(source)
        if not __import__("os").path.exists(cached):
            missing.append(module.__name__)
print(json.dumps(sorted(missing)))
"""


def test_what_eval_and_gepa_import_is_byte_compiled_where_bytecode_is_not_written():
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPYCACHEPREFIX"}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True)
    missing = json.loads(out.stdout.strip().splitlines()[-1])
    assert missing == [], (f"{len(missing)} installed modules imported by prime eval/gepa run have no bytecode "
                           f"(e.g. {missing[:5]}): run `make setup` (scripts/compile_startup.py)")
