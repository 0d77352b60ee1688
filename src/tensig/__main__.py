"""``python -m tensig`` runs the command line."""

import sys

from tensig.cli import main

sys.exit(main())
