"""``python -m netstack.bench.dta --role naive``: the naive collector helper process."""

import sys

from .naive import helper_main

sys.exit(helper_main())
