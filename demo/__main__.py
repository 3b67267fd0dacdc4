"""`python -m demo` (`make demo`): runs `demo.steps.main` with TF's start-up noise filtered from stderr; a
failed or interrupted run says so in one line and keeps its finished steps."""

import os
import subprocess
import sys
import traceback

from demo.commands import close_stderr, filter_stderr

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
forwarder = filter_stderr()  # before anything imports TensorFlow, whose start-up noise it drops
from demo.registry import RegistryError  # noqa: E402
from demo.steps import main  # noqa: E402
try:
    status = main()
except subprocess.CalledProcessError as e:
    print(f"error: `{' '.join(e.cmd)}` exited with status {e.returncode} (its output is above); "
          f"finished steps are kept, so a re-run resumes", file=sys.stderr)
    status = 1
except (RegistryError, RuntimeError) as e:  # a registry out of reach (PyPI, npm), the server not starting
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
