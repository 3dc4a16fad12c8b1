"""An MCP server that fails before it speaks: it writes an error to stderr and exits 3."""

import os
import sys

print(f"pid={os.getpid()}", file=sys.stderr)
print("fatal: environment variable EXAMPLE_API_TOKEN is not set", file=sys.stderr)
print("hint: export EXAMPLE_API_TOKEN=... and restart", file=sys.stderr, flush=True)
sys.exit(3)
