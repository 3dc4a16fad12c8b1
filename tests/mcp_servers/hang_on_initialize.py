"""An MCP server that never answers: it reads nothing and sleeps forever (with a child).

It ignores its stdin closing, so only the client's process-group kill ends it and its child.
"""

import os
import subprocess
import sys
import time

child = subprocess.Popen(["sleep", "600"], stdin=subprocess.DEVNULL)
print(f"pid={os.getpid()}", file=sys.stderr)
print(f"child_pid={child.pid}", file=sys.stderr)
print("loading a very large index...", file=sys.stderr, flush=True)
while True:
    time.sleep(3600)
