"""`python -m downstream.finetune`: see `downstream.finetune.cli`."""

import sys

from downstream.finetune.cli import main

sys.exit(main())
