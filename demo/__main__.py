"""`python -m demo` (`make demo`): runs `demo.steps.main` with TF's start-up noise filtered from stderr; a
failed, interrupted or stopped run says so in one line, leaves no process running and keeps its finished
steps."""

import subprocess
import sys
import traceback

from commands.tf_startup import quiet_tensorflow_startup

quiet_tensorflow_startup()  # before anything imports TensorFlow
from demo.commands import close_stderr, filter_stderr  # noqa: E402

forwarder = filter_stderr()  # before anything imports TensorFlow, whose start-up noise it drops
from commands.user_errors import UserError, exit_status  # noqa: E402
from demo import processes  # noqa: E402
from demo.registry import RegistryError  # noqa: E402
from demo.steps import main  # noqa: E402

KEPT = "finished steps are kept, so a re-run resumes"


class DemoFailed(UserError):
    """A step's command failed, a registry (PyPI, npm) was out of reach or the server did not start: exit
    status 1, as for any failed run (a bad flag or corpus is refused before any step, with status 2)."""

    status = 1


def failed(e: Exception) -> int:
    """The exit status of a run that `e` ended, its line printed: the one error path for what the demo knows
    (`DemoFailed`, a user error), a traceback and status 1 for anything else."""
    if isinstance(e, subprocess.CalledProcessError):
        e = DemoFailed(f"`{' '.join(e.cmd)}` exited with status {e.returncode} (its output is above); {KEPT}")
    elif isinstance(e, (RegistryError, RuntimeError)):  # a registry, the server not starting
        e = DemoFailed(str(e))
    try:
        return exit_status(e)
    except Exception:  # noqa: BLE001 - printed through the filter, before it closes
        traceback.print_exc()
        return 1


processes.stop_on_signals()  # SIGTERM, SIGHUP: stop like Ctrl-C
try:
    status = main()
except KeyboardInterrupt:
    print(f"interrupted: {KEPT}", file=sys.stderr)
    status = 130
except processes.Stopped as e:
    print(f"{e}: {KEPT}", file=sys.stderr)
    status = 128 + (e.signum or 15)
except Exception as e:  # noqa: BLE001 - a failed step, an unreachable registry or server, or a bug
    status = failed(e)
close_stderr()
forwarder.join(timeout=10)
sys.exit(status)
