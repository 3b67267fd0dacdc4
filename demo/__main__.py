"""`python -m demo` (`make demo`): runs `demo.steps.main` with TF's start-up noise filtered from stderr; a
failed or interrupted run says so in one line and keeps its finished steps."""

import os
import subprocess
import sys
import traceback

from demo.registry import RegistryError
from demo.steps import close_stderr, filter_stderr, main

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
forwarder = filter_stderr()
try:
    status = main()
except subprocess.CalledProcessError as e:
    print(f"error: `{' '.join(e.cmd)}` exited with status {e.returncode} (its output is above); "
          f"finished steps are kept, so a re-run resumes", file=sys.stderr)
    status = 1
except RegistryError as e:
    print(f"error: {e}", file=sys.stderr)
    status = 1
except KeyboardInterrupt:
    print("interrupted: finished steps are kept, so a re-run resumes", file=sys.stderr)
    status = 130
except Exception:  # printed through the filter, before it closes
    traceback.print_exc()
    status = 1
close_stderr()
forwarder.join(timeout=10)
sys.exit(status)
