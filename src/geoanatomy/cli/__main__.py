"""``python -m geoanatomy.cli ...`` is ``geoanatomy ...``."""
import sys

from . import main

sys.exit(main())
