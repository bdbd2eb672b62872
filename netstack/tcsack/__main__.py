import sys

from .live import main

sys.exit(main())
