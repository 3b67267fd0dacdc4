"""`python -m serving.export`: see `serving.export.cli`."""

import sys

from serving.export.cli import main

sys.exit(main())
