"""`python -m demo` (`make demo`): runs `demo.steps.main` with TF's start-up noise filtered from stderr; a
failed, interrupted or stopped run says so in one line, leaves no process running and keeps its finished
steps."""

import os
import subprocess
import sys
import traceback

from demo.commands import close_stderr, filter_stderr

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
forwarder = filter_stderr()  # before anything imports TensorFlow, whose start-up noise it drops
from demo import processes  # noqa: E402
from demo.registry import RegistryError  # noqa: E402
from demo.steps import main  # noqa: E402

KEPT = "finished steps are kept, so a re-run resumes"
processes.stop_on_signals()  # SIGTERM, SIGHUP: stop like Ctrl-C
try:
    status = main()
except subprocess.CalledProcessError as e:
    print(f"error: `{' '.join(e.cmd)}` exited with status {e.returncode} (its output is above); {KEPT}",
          file=sys.stderr)
    status = 1
except (RegistryError, RuntimeError) as e:  # a registry out of reach (PyPI, npm), the server not starting
    print(f"error: {e}", file=sys.stderr)
    status = 1
except KeyboardInterrupt:
    print(f"interrupted: {KEPT}", file=sys.stderr)
    status = 130
except processes.Stopped as e:
    print(f"{e}: {KEPT}", file=sys.stderr)
    status = 128 + (e.signum or 15)
except Exception:  # printed through the filter, before it closes
    traceback.print_exc()
    status = 1
close_stderr()
forwarder.join(timeout=10)
sys.exit(status)
